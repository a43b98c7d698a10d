// Command resume measures downloads that a proxy cuts: a -size body (1 GiB
// by default) streamed through a TCP proxy that closes each connection
// after -every bytes (64 MiB) towards the client, over HTTP/1.1 and TLS
// HTTP/2, through the Transport's defaults (which resume a broken body).
//
// Each download runs in a child process of its own (this program, started
// again), which streams the body into a SHA-256 and exits; the kernel's
// record of its peak resident set (getrusage's ru_maxrss) is its peak
// memory. Per protocol it reports the runs whose body was intact (the same
// SHA-256 and length), the resumes, the bytes the server sent over the
// resource's size, and the peak RSS beside uncut runs' through the same
// proxy.
//
//	go run ./resume [-size 1073741824] [-every 67108864] [-runs 100] [-uncut 3]
//
// Traffic goes to 127.0.0.1 only; every run has a time limit.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/backoff-jitter/retry"
)

const childEnv = "RESUME_BENCH_CHILD" // url,proto,certfile,size in a child

func main() {
	if os.Getenv(childEnv) != "" {
		if err := child(os.Getenv(childEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "resume child:", err)
			os.Exit(1)
		}
		return
	}
	size := flag.Int64("size", 1<<30, "body size, bytes")
	every := flag.Int64("every", 64<<20, "the proxy cuts each connection after this many bytes towards the client")
	runs := flag.Int("runs", 100, "cut downloads per protocol")
	uncut := flag.Int("uncut", 3, "uncut downloads per protocol, the memory baseline")
	limit := flag.Duration("limit", 2*time.Minute, "time limit of one download")
	sockbuf := flag.Int("sockbuf", 0, "the server's send and the proxy's receive socket buffers, bytes (0: the kernel's): what a cut discards in flight")
	flag.Parse()
	if *size <= 0 || *every <= 0 || *runs < 1 || *uncut < 1 {
		fmt.Fprintln(os.Stderr, "resume: -size and -every must be positive, -runs and -uncut at least 1")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[0], *size, *every, *runs, *uncut, *limit, *sockbuf); err != nil {
		fmt.Fprintln(os.Stderr, "resume:", err)
		os.Exit(1)
	}
}

// content is the resource's byte at offset i: cheap to make at any
// offset, so that neither side holds the body.
func content(i int64) byte { return byte(i*7 + i>>13) }

// resource is the body as an io.ReadSeeker for http.ServeContent.
type resource struct{ off, size int64 }

func (r *resource) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-r.off))
	for i := range n {
		p[i] = content(r.off + int64(i))
	}
	r.off += int64(n)
	return n, nil
}

func (r *resource) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		r.off = offset
	case io.SeekCurrent:
		r.off += offset
	case io.SeekEnd:
		r.off = r.size + offset
	}
	if r.off < 0 {
		return 0, errors.New("negative offset")
	}
	return r.off, nil
}

// counting counts the body bytes a handler writes.
type counting struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w counting) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// proxy forwards TCP connections to target, closing each once cut bytes
// (0: never) have gone towards the client.
func proxy(target string, cut *atomic.Int64, sockbuf int) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				s, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				if sockbuf > 0 {
					s.(*net.TCPConn).SetReadBuffer(sockbuf)
				}
				go func() { io.Copy(s, c); s.Close() }()
				if n := cut.Load(); n > 0 {
					io.CopyN(c, s, n)
				} else {
					io.Copy(c, s)
				}
				c.Close()
				s.Close()
			}()
		}
	}()
	return ln, nil
}

type result struct {
	ok           bool
	bytes, rss   int64
	resumes      int
	sha          string
	elapsed      time.Duration
	sentOverSize float64
	err          string
}

// run measures the downloads, each by a child: exe started again, and
// writes the table to w.
func run(w io.Writer, exe string, size, every int64, runs, uncut int, limit time.Duration, sockbuf int) error {
	h := sha256.New()
	if _, err := io.Copy(h, &resource{size: size}); err != nil {
		return err
	}
	want := hex.EncodeToString(h.Sum(nil))
	var sent atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"bench"`)
		http.ServeContent(counting{w, &sent}, r, "", time.Time{}, &resource{size: size})
	})
	buffers := "the kernel's"
	if sockbuf > 0 {
		buffers = strconv.Itoa(sockbuf) + " bytes"
	}
	fmt.Fprintf(w, "resume: %d MiB bodies, the proxy cutting every %d MiB, %d cut and %d uncut runs per protocol, socket buffers %s\n",
		size>>20, every>>20, runs, uncut, buffers)
	fmt.Fprintf(w, "%-6s %8s %8s %12s %14s %14s %10s\n", "proto", "intact", "resumes", "sent/size", "peak RSS cut", "peak RSS uncut", "time p50")
	for _, proto := range []string{"h1", "h2"} {
		srv := httptest.NewUnstartedServer(handler)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the proxy's cuts
		srv.EnableHTTP2 = proto == "h2"
		if sockbuf > 0 {
			srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
				if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
					c = tc.NetConn()
				}
				if tcp, ok := c.(*net.TCPConn); ok && state == http.StateNew {
					tcp.SetWriteBuffer(sockbuf)
				}
			}
		}
		certFile := ""
		if proto == "h2" {
			srv.StartTLS()
			f, err := os.CreateTemp("", "resume-cert-*.pem")
			if err != nil {
				return err
			}
			pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			f.Close()
			certFile = f.Name()
			defer os.Remove(certFile)
		} else {
			srv.Start()
		}
		var cut atomic.Int64
		ln, err := proxy(srv.Listener.Addr().String(), &cut, sockbuf)
		if err != nil {
			return err
		}
		scheme := "http"
		if proto == "h2" {
			scheme = "https"
		}
		url := scheme + "://" + ln.Addr().String() + "/file"
		download := func() result {
			sent.Store(0)
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe)
			cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{url, proto, certFile, strconv.FormatInt(size, 10)}, ","))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			r := result{sentOverSize: float64(sent.Load()) / float64(size)}
			if err != nil {
				r.err = err.Error()
				return r
			}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				r.rss = ru.Maxrss << 10
			}
			f := strings.Fields(string(out))
			if len(f) != 4 {
				r.err = fmt.Sprintf("child said %q", out)
				return r
			}
			r.bytes, _ = strconv.ParseInt(f[0], 10, 64)
			r.sha = f[1]
			r.resumes, _ = strconv.Atoi(f[2])
			ns, _ := strconv.ParseInt(f[3], 10, 64)
			r.elapsed = time.Duration(ns)
			r.ok = r.bytes == size && r.sha == want
			return r
		}
		var uncutRSS []int64
		cut.Store(0)
		for range uncut {
			r := download()
			if !r.ok {
				return fmt.Errorf("%s: an uncut download failed: %s", proto, r.err)
			}
			uncutRSS = append(uncutRSS, r.rss)
		}
		cut.Store(every)
		var intact int
		var resumes []int
		var rss []int64
		var times []time.Duration
		worst := 0.0
		for i := range runs {
			r := download()
			if r.ok {
				intact++
			} else {
				fmt.Fprintf(os.Stderr, "%s run %d: %d bytes, sha %s, %s\n", proto, i, r.bytes, r.sha, r.err)
			}
			resumes, rss, times = append(resumes, r.resumes), append(rss, r.rss), append(times, r.elapsed)
			worst = max(worst, r.sentOverSize)
		}
		ln.Close()
		srv.Close()
		slices.Sort(resumes)
		slices.Sort(rss)
		slices.Sort(uncutRSS)
		slices.Sort(times)
		fmt.Fprintf(w, "%-6s %4d/%-3d %8d %12.4f %11.1f MiB %11.1f MiB %10v\n", proto, intact, runs, resumes[len(resumes)/2],
			worst, float64(rss[len(rss)-1])/(1<<20), float64(uncutRSS[len(uncutRSS)/2])/(1<<20), times[len(times)/2].Round(time.Millisecond))
	}
	fmt.Fprintln(w, "(resumes: median; sent/size: the most the server sent over the size, in any run; peak RSS cut: the largest of the cut runs; uncut: the median)")
	return nil
}

// child downloads the body once through the Transport's defaults, its
// resumes raised to the cuts expected, and prints the bytes read, their
// SHA-256, the resumes and the time taken.
func child(spec string) error {
	f := strings.Split(spec, ",")
	if len(f) != 4 {
		return fmt.Errorf("bad spec %q", spec)
	}
	url, proto, certFile := f[0], f[1], f[2]
	size, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return err
	}
	base := cleanhttp.DefaultPooledTransport()
	if proto == "h2" {
		pemBytes, err := os.ReadFile(certFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemBytes)
		base.TLSClientConfig = &tls.Config{RootCAs: pool}
		base.ForceAttemptHTTP2 = true
	}
	var resumes atomic.Int32
	rt := retry.New(base, retry.WithResume(64), retry.WithOnResume(func(e retry.ResumeEvent) {
		if e.Err == nil {
			resumes.Add(1)
		}
	}))
	defer rt.CloseIdleConnections()
	start := time.Now()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if proto == "h2" && resp.ProtoMajor != 2 {
		return fmt.Errorf("%s, not HTTP/2", resp.Proto)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return fmt.Errorf("after %d of %d bytes: %w", n, size, err)
	}
	fmt.Println(n, hex.EncodeToString(h.Sum(nil)), resumes.Load(), time.Since(start).Nanoseconds())
	return nil
}
