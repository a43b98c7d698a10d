// Cas measures what sharing a Pacer's state through Redis costs when the
// state is a versioned blob that every process reads, updates in Go and
// writes back with compare-and-set, against updating it in one Lua script
// as redispace does today: K processes (real ones: this program started
// again with -child), each making updates of one key's blob at a rate
// (one update per answer the fleet hears) for a while. It reports the
// updates done per second, the conflicts (compare-and-set refused, the
// update read and made again) per update, and the latency of an update,
// conflicts included.
//
//	cd bench && go run ./cas                  # K = 10; 5, 100, 1000/s and flat out
//	go run ./cas -k 10 -rates 100,1000,0 -blob 4096 -for 3s
//
// A rate of 0 is as fast as the processes can go. redis-server comes from
// Debian's package; it runs on 127.0.0.1, with persistence off.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// casScript writes the blob ARGV[2] as version ARGV[1]+1 of KEYS[1] if
// its version is still ARGV[1]: the update a process made in Go.
var casScript = redis.NewScript(`
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', v + 1, 'blob', ARGV[2])
return 1`)

// luaScript is the update made in Redis, as redispace's scripts make
// theirs: the blob read, changed and written back in one script, which
// no other update can come between. (The change is one byte: the cost of
// the logic itself, which redispace's scripts spend on some thirty
// fields, is not measured, only that of the round trip and the blob.)
var luaScript = redis.NewScript(`
local blob = redis.call('HGET', KEYS[1], 'blob') or string.rep('x', tonumber(ARGV[1]))
local c = string.char((string.byte(blob, 1) + 1) % 256)
redis.call('HSET', KEYS[1], 'blob', c .. string.sub(blob, 2))
return 1`)

// report is what a child prints: its updates, conflicts and latencies.
type report struct {
	Updates   int       `json:"updates"`
	Conflicts int       `json:"conflicts"`
	Latencies []float64 `json:"latencies_us"`
}

func main() {
	child := flag.Bool("child", false, "(internal) run as one process of the fleet")
	addr := flag.String("redis", "", "(child) Redis's address")
	mode := flag.String("mode", "cas", "(child) cas or lua")
	k := flag.Int("k", 10, "processes")
	rates := flag.String("rates", "5,100,1000,0", "fleet-wide updates per second to try, comma-separated; 0: as fast as possible")
	rate := flag.Float64("rate", 0, "(child) its own updates per second; 0: as fast as possible")
	blob := flag.Int("blob", 1024, "bytes of state")
	dur := flag.Duration("for", 3*time.Second, "how long each run lasts")
	flag.Parse()
	if *child {
		r, err := runChild(*addr, *mode, *rate, *blob, *dur)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	if err := run(*k, *rates, *blob, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "cas:", err)
		os.Exit(1)
	}
}

func run(k int, rates string, blob int, dur time.Duration) error {
	rs, err := startRedis()
	if err != nil {
		return err
	}
	defer rs.stop()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("%d processes, a blob of %d bytes, %v per run, Redis on %s\n\n", k, blob, dur, rs.addr)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tasked/s\tdone/s\tconflicts per update\tp50 µs\tp99 µs\tmax µs\t")
	for _, field := range strings.Split(rates, ",") {
		fleetRate, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
		if err != nil {
			return fmt.Errorf("rate %q: %v", field, err)
		}
		for _, mode := range []string{"lua", "cas"} {
			sum, err := fleet(self, rs.addr, mode, k, fleetRate/float64(k), blob, dur)
			if err != nil {
				return err
			}
			lat := sum.Latencies
			slices.Sort(lat)
			at := func(p float64) float64 { return lat[min(int(p*float64(len(lat))), len(lat)-1)] }
			asked := "max"
			if fleetRate > 0 {
				asked = strconv.FormatFloat(fleetRate, 'f', 0, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.0f\t%.0f\t%.0f\t\n", mode, asked,
				float64(sum.Updates)/dur.Seconds(), float64(sum.Conflicts)/float64(sum.Updates), at(0.5), at(0.99), lat[len(lat)-1])
		}
	}
	return tw.Flush()
}

// fleet runs k children at once, each at rate, and sums their reports.
func fleet(self, addr, mode string, k int, rate float64, blob int, dur time.Duration) (report, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), "cas").Err(); err != nil {
		return report{}, err
	}
	var mu sync.Mutex
	var sum report
	var firstErr error
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), dur+30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, self, "-child", "-redis", addr, "-mode", mode,
				"-rate", strconv.FormatFloat(rate, 'f', -1, 64), "-blob", strconv.Itoa(blob), "-for", dur.String()).Output()
			var r report
			if err == nil {
				err = json.Unmarshal(out, &r)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("child: %v", err)
			}
			sum.Updates += r.Updates
			sum.Conflicts += r.Conflicts
			sum.Latencies = append(sum.Latencies, r.Latencies...)
		})
	}
	wg.Wait()
	if firstErr == nil && sum.Updates == 0 {
		firstErr = fmt.Errorf("no update made")
	}
	return sum, firstErr
}

// runChild makes updates at rate for dur: each one, with cas, a read of the
// blob and its version, a change made in Go, and a compare-and-set, again
// until it is taken; with lua, one script.
func runChild(addr, mode string, rate float64, blob int, dur time.Duration) (report, error) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer rdb.Close()
	state := []byte(strings.Repeat("x", blob))
	var r report
	start := time.Now()
	// The processes' schedules start at random phases: started together
	// with one schedule, they would all update at the same instants.
	phase := rand.Float64()
	for n := 0; time.Since(start) < dur; n++ {
		if rate > 0 {
			at := start.Add(time.Duration((float64(n) + phase) / rate * float64(time.Second)))
			if wait := time.Until(at); wait > 0 {
				time.Sleep(wait)
			}
		}
		t0 := time.Now()
		switch mode {
		case "lua":
			if err := luaScript.Run(ctx, rdb, []string{"cas"}, blob).Err(); err != nil {
				return r, err
			}
		case "cas":
			for {
				vals, err := rdb.HMGet(ctx, "cas", "v", "blob").Result()
				if err != nil {
					return r, err
				}
				v := 0
				if s, ok := vals[0].(string); ok {
					v, _ = strconv.Atoi(s)
				}
				if s, ok := vals[1].(string); ok && len(s) == blob {
					copy(state, s)
				}
				for i := range state {
					state[i]++
				}
				ok, err := casScript.Run(ctx, rdb, []string{"cas"}, v, state).Int()
				if err != nil {
					return r, err
				}
				if ok == 1 {
					break
				}
				r.Conflicts++
			}
		default:
			return r, fmt.Errorf("mode %q: want cas or lua", mode)
		}
		r.Updates++
		r.Latencies = append(r.Latencies, float64(time.Since(t0))/float64(time.Microsecond))
	}
	return r, nil
}

// redisServer is a redis-server of the program's own on loopback.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
}

func startRedis() (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed (apt-get install redis-server): %v", err)
	}
	port := strconv.Itoa(20000 + os.Getpid()%20000)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rs := &redisServer{addr: "127.0.0.1:" + port, cmd: cmd}
	rdb := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer rdb.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if rdb.Ping(context.Background()).Err() == nil {
			return rs, nil
		}
		if time.Now().After(deadline) {
			rs.stop()
			return nil, fmt.Errorf("redis-server did not answer on %s within 10s", rs.addr)
		}
	}
}

func (r *redisServer) stop() {
	r.cmd.Process.Kill()
	r.cmd.Wait()
}
