// Package nginx runs a real nginx with limit_req on loopback for the
// measurements of bench/: a rate-limited server that records, in its
// access log, when each attempt arrived and how it was answered.
package nginx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/daemon"
)

// Event is one attempt the server saw: when it arrived, from the start of
// its run, and the status it was answered with.
type Event struct {
	At     time.Duration
	Status int
}

// Server is a real nginx with limit_req, started on loopback with a
// config written to a temporary directory. It records attempts in its
// access log, one line each: the time of the log write ($msec, wall-clock
// seconds to the millisecond) and the status. For these tiny responses the
// log write follows the request's arrival within the millisecond.
type Server struct {
	dir  string
	addr string
	cmd  *exec.Cmd
}

// nginxConf is the config with its placeholders: {{dir}}, {{addr}},
// {{rate}}, {{status}} (of a refusal) and {{locations}}, whose limit_req
// lines have {{burst}}.
const nginxConf = `worker_processes 1;
daemon off;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 4096; }
http {
	log_format timed '$msec $status';
	access_log {{dir}}/access.log timed;
	client_body_temp_path {{dir}}/body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
	keepalive_requests 100000;
	limit_req_zone $server_name zone=api:1m rate={{rate}}r/s;
	limit_req_status {{status}};
	server {
		listen {{addr}};
		server_name api;
		root {{dir}}/www;
{{locations}}
	}
}
`

// plainLocations serve "ok" at every path, limited. A static file, not
// "return": return runs in the rewrite phase, before limit_req's
// preaccess phase could refuse.
const plainLocations = `		location / {
			limit_req zone=api{{burst}};
		}`

// route53Locations answer ListHostedZones (GET /2013-04-01/hostedzone)
// with an empty list, limited, and refuse as Route 53 does: 400 with a
// Throttling error document. The error page's own location has no limit.
const route53Locations = `		location = ` + ListHostedZonesPath + ` {
			limit_req zone=api{{burst}};
			default_type text/xml;
			alias {{dir}}/www/list.xml;
		}
		location = /throttled.xml {
			internal;
			default_type text/xml;
		}
		error_page 400 /throttled.xml;`

// ListHostedZonesPath is the path of Route 53's ListHostedZones call.
const ListHostedZonesPath = "/2013-04-01/hostedzone"

// The documents of StartRoute53: an empty list of zones, and Route 53's
// answer over its rate.
const (
	ListHostedZonesXML = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<ListHostedZonesResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><HostedZones></HostedZones><IsTruncated>false</IsTruncated><MaxItems>100</MaxItems></ListHostedZonesResponse>` + "\n"
	ThrottlingXML      = `<?xml version="1.0"?>` + "\n" + `<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>` + "\n"
)

// Start starts nginx limiting every request to rate requests a second,
// answering the others 429; with install, it installs Debian's
// nginx-light first when nginx is absent. With a burst of 0, nginx
// refuses any request that comes sooner than 1/rate after the last one
// it accepted; with burst n (limit_req's burst=n nodelay), it accepts up
// to n such requests at once, a token bucket of n+1.
func Start(rate float64, burst int, install bool) (*Server, error) {
	return start(rate, burst, install, http.StatusTooManyRequests, plainLocations, map[string]string{"index.html": "ok\n"})
}

// StartRoute53 starts nginx as a Route 53-style API: ListHostedZones
// (GET [ListHostedZonesPath]) limited to rate requests a second with
// burst as for [Start], the others answered as Route 53 answers over its
// rate, 400 with a Throttling error document; every other path is 404.
// With install, it installs Debian's nginx-light first when nginx is
// absent.
func StartRoute53(rate float64, burst int, install bool) (*Server, error) {
	return start(rate, burst, install, http.StatusBadRequest, route53Locations,
		map[string]string{"list.xml": ListHostedZonesXML, "throttled.xml": ThrottlingXML})
}

// start starts nginx with locations, refusing with status over rate and
// burst, and the files of its root directory, by name.
func start(rate float64, burst int, install bool, status int, locations string, files map[string]string) (*Server, error) {
	if burst < 0 {
		return nil, fmt.Errorf("nginx: burst %d: want 0 or more", burst)
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if !install {
			return nil, errors.New("nginx is not installed (run with -install or apt-get install nginx-light)")
		}
		if err := daemon.AptInstall("nginx-light"); err != nil {
			return nil, err
		}
	}
	addr, err := daemon.FreeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pacing-nginx-")
	if err != nil {
		return nil, err
	}
	// nginx's workers run as an unprivileged user: they must read the pages.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	limit := ""
	if burst > 0 {
		limit = fmt.Sprintf(" burst=%d nodelay", burst)
	}
	conf := strings.NewReplacer("{{locations}}", locations).Replace(nginxConf)
	conf = strings.NewReplacer("{{dir}}", dir, "{{rate}}", strconv.FormatFloat(rate, 'f', -1, 64),
		"{{addr}}", addr, "{{status}}", strconv.Itoa(status), "{{burst}}", limit).Replace(conf)
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		return nil, err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, "www", name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-c", confPath, "-p", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &Server{dir: dir, addr: addr, cmd: cmd}
	if err := daemon.AwaitListen("nginx", addr, 10*time.Second); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// URL is the server's address.
func (n *Server) URL() string { return "http://" + n.addr + "/" }

// logPath is the access log, which accumulates over every run.
func (n *Server) logPath() string { return filepath.Join(n.dir, "access.log") }

// Mark returns the size of the access log: nginx creates it empty at start.
func (n *Server) Mark() (int64, error) {
	fi, err := os.Stat(n.logPath())
	if err != nil {
		return 0, fmt.Errorf("nginx access log: %w", err)
	}
	return fi.Size(), nil
}

// Since waits for the access log to settle, then parses the lines written
// after mark, timed from start.
func (n *Server) Since(mark int64, start time.Time) ([]Event, error) {
	n.settle()
	f, err := os.Open(n.logPath())
	if err != nil {
		return nil, fmt.Errorf("nginx access log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(mark, io.SeekStart); err != nil {
		return nil, fmt.Errorf("nginx access log: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("nginx access log: %w", err)
	}
	return ParseLog(b, start.UnixMilli(), time.Now().UnixMilli()), nil
}

// settle waits, for a second at most, until the access log has not grown
// for logQuiet: nginx logs a request just after sending its response, so
// the last lines of a run may lag its last response.
func (n *Server) settle() {
	const logQuiet = 30 * time.Millisecond
	last := int64(-1)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(logQuiet) {
		size, err := n.Mark()
		if err != nil || size == last {
			return
		}
		last = size
	}
}

// Close stops nginx and removes its directory.
func (n *Server) Close() {
	n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		n.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(n.dir)
}

// ParseLog parses the complete lines of an nginx access log in the format
// "$msec $status", timing each from startMs (Unix milliseconds). Lines
// that do not parse are skipped, as is an unfinished last line, and so are
// lines timed more than logSlack outside [startMs, endMs]: not of this run.
func ParseLog(b []byte, startMs, endMs int64) []Event {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	} else {
		return nil
	}
	var evs []Event
	for _, line := range strings.Split(string(b), "\n") {
		ms, status, ok := ParseLogLine(line)
		if !ok || ms < startMs-logSlack.Milliseconds() || ms > endMs+logSlack.Milliseconds() {
			continue
		}
		evs = append(evs, Event{At: time.Duration(ms-startMs) * time.Millisecond, Status: status})
	}
	return evs
}

// logSlack is how far outside its run a line of the access log may be
// timed: nginx's clock is cached per event loop iteration.
const logSlack = time.Second

// ParseLogLine parses one line of the access log, "$msec $status" (as
// "1712345678.123 429"): the time in Unix milliseconds and the status.
// Further fields are ignored; ok is false if the two do not parse.
func ParseLogLine(line string) (ms int64, status int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, 0, false
	}
	ms, ok = parseMsec(f[0])
	if !ok {
		return 0, 0, false
	}
	status, err := strconv.Atoi(f[1])
	if err != nil || status < 100 || status > 599 {
		return 0, 0, false
	}
	return ms, status, true
}

// parseMsec parses nginx's $msec, seconds with exactly three decimals, to
// milliseconds, without the rounding of a float.
func parseMsec(s string) (int64, bool) {
	sec, frac, found := strings.Cut(s, ".")
	if !found || sec == "" || len(frac) != 3 {
		return 0, false
	}
	// ParseUint allows no sign; 40 bits of seconds are 34,000 years.
	secs, err := strconv.ParseUint(sec, 10, 40)
	if err != nil {
		return 0, false
	}
	millis, err := strconv.ParseUint(frac, 10, 16)
	if err != nil {
		return 0, false
	}
	return int64(secs)*1000 + int64(millis), true
}
