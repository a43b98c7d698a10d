// Package chart is the small SVG and CSV writer the measurement programs
// of bench/ share: an SVG document built by hand, with the standard
// library only, a round-number axis, a legend, and CSV files.
package chart

import (
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Font is the font family of every chart.
const Font = "Helvetica, Arial, sans-serif"

// Doc is an SVG document being written.
type Doc struct {
	strings.Builder
}

// Printf appends formatted text.
func (d *Doc) Printf(format string, args ...any) {
	fmt.Fprintf(d, format, args...)
}

// Begin writes the document's root element and a white background.
// fontSize, if positive, is the default size of its text.
func (d *Doc) Begin(width, height, fontSize int) {
	size := ""
	if fontSize > 0 {
		size = fmt.Sprintf(` font-size="%d"`, fontSize)
	}
	d.Printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s"%s>`+"\n",
		width, height, width, height, Font, size)
	d.Printf(`<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
}

// End closes the document and returns it.
func (d *Doc) End() string {
	d.WriteString("</svg>\n")
	return d.String()
}

// Heading writes a chart's title and subtitle, left-aligned at x.
func (d *Doc) Heading(x int, title, subtitle string) {
	d.Printf(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", x, Esc(title))
	d.Printf(`<text x="%d" y="42" fill="#444">%s</text>`+"\n", x, Esc(subtitle))
}

// Item is one entry of a legend: a swatch and its label.
type Item struct {
	Fill   string // the colour of a square swatch
	Dashed bool   // a dashed line instead of a square
	Label  string
}

// Legend writes items side by side from (x, y).
func (d *Doc) Legend(x, y int, items ...Item) {
	for _, it := range items {
		if it.Dashed {
			d.Printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#222" stroke-dasharray="5,3"/>`, x, y+6, x+14, y+6)
		} else {
			d.Printf(`<rect x="%d" y="%d" width="14" height="11" fill="%s"/>`, x, y+1, it.Fill)
		}
		d.Printf(`<text x="%d" y="%d">%s</text>`+"\n", x+20, y+10, Esc(it.Label))
		x += 24 + 6*len(it.Label) + 18
	}
}

// Esc escapes s for XML text or an attribute's value.
func Esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// NiceCeil rounds v up to 1, 2 or 5 times a power of ten; it is 1 for a v
// that is not a positive, finite number.
func NiceCeil(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 1) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// WriteFile writes doc to path, making its directory if need be.
func WriteFile(path, doc string) error {
	if err := mkdirFor(path); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// WriteCSV writes rows, the header first, to the CSV file path, making its
// directory if need be.
func WriteCSV(path string, rows [][]string) error {
	if err := mkdirFor(path); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := csv.NewWriter(f).WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mkdirFor(path string) error {
	if dir := filepath.Dir(path); dir != "." {
		return os.MkdirAll(dir, 0o755)
	}
	return nil
}
