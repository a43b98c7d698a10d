// Command peakrss measures the peak memory of one upload through each
// library: a POST of -size bytes (64 MiB by default) from an opaque reader,
// with no GetBody and no length, to a loopback server that discards it.
//
// Each library runs in a child process of its own (this program, started
// again), which sends the one request and exits; the kernel's record of the
// child's peak resident set (getrusage's ru_maxrss) is its peak memory. The
// child also reads its own VmHWM from /proc/self/status, which must agree.
// Each library runs -runs times and the median is reported, beside a child
// that sends nothing: the Go runtime's own footprint.
//
//	go run ./peakrss [-size 67108864] [-runs 3] [-csv results/peakrss.csv]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"

	"github.com/backoff-jitter/retry/bench"
	"github.com/hashicorp/go-cleanhttp"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// childEnv names the library a child process sends through; its presence
// makes this program a child.
const childEnv = "PEAKRSS_CHILD"

// idle is the name of the child that sends nothing.
const idle = "idle"

func main() {
	if lib := os.Getenv(childEnv); lib != "" {
		if err := child(lib, os.Getenv("PEAKRSS_URL"), os.Getenv("PEAKRSS_SIZE"), os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "peakrss child:", err)
			os.Exit(1)
		}
		return
	}
	size := flag.Int64("size", 64<<20, "request body size in bytes")
	runs := flag.Int("runs", 3, "children per library; the median is reported")
	csvPath := flag.String("csv", "", "also write the results to this CSV file")
	flag.Parse()
	exe, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	results, err := measureAll(exe, *size, *runs)
	if err != nil {
		fatal(err)
	}
	printTable(os.Stdout, *size, results)
	if *csvPath != "" {
		if err := writeCSV(*csvPath, results); err != nil {
			fatal(err)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "peakrss:", err)
	os.Exit(1)
}

// result is the peak memory of one library's children, in KiB.
type result struct {
	lib    string
	maxRSS []int64 // ru_maxrss of each child
	vmHWM  []int64 // VmHWM each child read of itself
}

func (r result) median() int64 {
	s := slices.Clone(r.maxRSS)
	slices.Sort(s)
	return s[len(s)/2]
}

// measureAll starts the server and runs every library's children.
func measureAll(exe string, size int64, runs int) ([]result, error) {
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Add(n)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()

	libs := []string{idle}
	for _, l := range bench.Libs {
		libs = append(libs, l.Name)
	}
	var results []result
	for _, lib := range libs {
		res := result{lib: lib}
		for range runs {
			before := received.Load()
			rss, hwm, err := runChild(exe, lib, srv.URL, size)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", lib, err)
			}
			if lib != idle {
				if got := received.Load() - before; got != size {
					return nil, fmt.Errorf("%s: the server received %d bytes; want %d", lib, got, size)
				}
			}
			res.maxRSS = append(res.maxRSS, rss)
			res.vmHWM = append(res.vmHWM, hwm)
		}
		results = append(results, res)
	}
	return results, nil
}

// runChild runs exe as the child for lib and returns its ru_maxrss and the
// VmHWM it reported, in KiB.
func runChild(exe, lib, url string, size int64) (maxRSS, vmHWM int64, err error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+lib, "PEAKRSS_URL="+url, "PEAKRSS_SIZE="+strconv.FormatInt(size, 10))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, out.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, errors.New("no rusage for the child")
	}
	vmHWM, err = parseKiB(out.String(), "VmHWM:")
	if err != nil {
		return 0, 0, err
	}
	return ru.Maxrss, vmHWM, nil // Linux reports ru_maxrss in KiB
}

// child sends one request of size bytes through lib to url, then writes
// its own /proc/self/status VmHWM line to w.
func child(lib, url, sizeStr string, w io.Writer) error {
	if lib != idle {
		size, err := strconv.ParseInt(sizeStr, 10, 64)
		if err != nil {
			return fmt.Errorf("size %q: %w", sizeStr, err)
		}
		if err := send(lib, url, size); err != nil {
			return err
		}
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "VmHWM:") {
			_, err := io.WriteString(w, line)
			return err
		}
	}
	return errors.New("no VmHWM in /proc/self/status")
}

// send posts size bytes from an opaque reader through lib to url.
func send(lib, url string, size int64) error {
	l, ok := bench.LibNamed(lib)
	if !ok {
		return fmt.Errorf("unknown library %q", lib)
	}
	base := cleanhttp.DefaultPooledTransport()
	defer base.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), "POST", url, bench.Opaque{Reader: &patternReader{left: size}})
	if err != nil {
		return err
	}
	resp, err := l.Wrap(base).RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// patternReader yields left bytes of a repeating pattern without holding
// them: the body costs no memory of its own.
type patternReader struct {
	left int64
	off  int
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.left)]
	for i := range b {
		b[i] = byte('a' + (p.off+i)%26)
	}
	p.off = (p.off + len(b)) % 26
	p.left -= int64(len(b))
	return len(b), nil
}

// parseKiB finds the line starting with key in s and returns its value,
// "12345 kB", in KiB.
func parseKiB(s, key string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %q line in %q", key, s)
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// printTable writes the medians, each library's ratio to retry's, and the
// medians less the idle child's.
func printTable(w io.Writer, size int64, results []result) {
	byName := map[string]int64{}
	for _, r := range results {
		byName[r.lib] = r.median()
	}
	fmt.Fprintf(w, "peak RSS of one POST of %d MiB from an opaque reader (median of %d children)\n\n", size>>20, len(results[0].maxRSS))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "library\tmax RSS\tabove idle\tvs retry\tVmHWM\t")
	for _, r := range results {
		m := r.median()
		hwm := slices.Clone(r.vmHWM)
		slices.Sort(hwm)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fx\t%s\t\n", r.lib, mib(m), mib(m-byName[idle]), float64(m)/float64(byName["retry"]), mib(hwm[len(hwm)/2]))
	}
	tw.Flush()
}

func writeCSV(path string, results []result) error {
	rows := [][]string{{"library", "run", "maxrss_kib", "vmhwm_kib"}}
	for _, r := range results {
		for i := range r.maxRSS {
			rows = append(rows, []string{r.lib, strconv.Itoa(i + 1), strconv.FormatInt(r.maxRSS[i], 10), strconv.FormatInt(r.vmHWM[i], 10)})
		}
	}
	return chart.WriteCSV(path, rows)
}
