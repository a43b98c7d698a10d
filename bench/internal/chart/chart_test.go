package chart

import (
	"encoding/csv"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ v, want float64 }{
		{0.3, 0.5}, {1, 1}, {1.01, 2}, {3, 5}, {7, 10}, {10, 10}, {10.5, 20}, {12, 20}, {250, 500}, {999, 1000},
		{0.037, 0.05}, {1250, 2000},
		{0, 1}, {-5, 1}, {math.NaN(), 1}, {math.Inf(1), 1},
	} {
		if got := NiceCeil(tt.v); got != tt.want {
			t.Errorf("NiceCeil(%v) = %v; want %v", tt.v, got, tt.want)
		}
	}
}

func TestDocIsWellFormed(t *testing.T) {
	var d Doc
	d.Begin(100, 50, 11)
	d.Heading(10, "a <title> & more", `"quoted"`)
	d.Legend(10, 30, Item{Fill: "#3a9a4a", Label: "accepted"}, Item{Dashed: true, Label: "capacity < 5"})
	doc := d.End()
	dec := xml.NewDecoder(strings.NewReader(doc))
	var texts []string
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed XML: %v\n%s", err, doc)
			}
			break
		}
		if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) != "" {
			texts = append(texts, string(cd))
		}
	}
	want := []string{"a <title> & more", `"quoted"`, "accepted", "capacity < 5"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("texts = %q; want %q", texts, want)
	}
}

func TestWriteCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.csv")
	rows := [][]string{{"a", "b"}, {"1", "x,y"}}
	if err := WriteCSV(path, rows); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := csv.NewReader(f).ReadAll()
	if err != nil || len(got) != 2 || got[1][1] != "x,y" {
		t.Errorf("read back %q, %v", got, err)
	}
}
