package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// writeTable prints the results as a table, with each strategy's ratios to
// FullJitter at the same number of clients.
func writeTable(w io.Writer, cfg config, res results) error {
	fmt.Fprintf(w, "Contention simulation: %d runs per cell, seed %d.\n", cfg.runs, cfg.seed)
	fmt.Fprintf(w, "One-way latency |Normal(%v, %v)|; backoff base %v, cap %s.\n", cfg.latency, cfg.latencySD, cfg.base, capText(cfg.cap))
	fmt.Fprint(w, `calls: writes that reached the server, mean per run.
time: until the last client's write succeeded, mean per run, in ms.
Ratios are to FullJitter at the same number of clients.

`)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "clients\t%-12s\tcalls\ttime (ms)\tcalls/FullJitter\ttime/FullJitter\t\n", "algorithm")
	for i, c := range res.cells {
		if i > 0 && c.clients != res.cells[i-1].clients {
			fmt.Fprint(tw, "\t\t\t\t\t\t\n")
		}
		full := find(res.cells, nameFullJitter, c.clients)
		fmt.Fprintf(tw, "%d\t%-12s\t%.1f\t%.1f\t%s\t%s\t\n", c.clients, c.strategy, c.calls, c.timeMS,
			ratio(c.calls, full.calls), ratio(c.timeMS, full.timeMS))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The blank lines between client levels are cells of spaces.
	for line := range strings.Lines(table.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	_, err := fmt.Fprintln(w)
	return err
}

// capText describes a cap, where 0 means none.
func capText(limit time.Duration) string {
	if limit == 0 {
		return "none"
	}
	return limit.String()
}

// find returns the cell of the strategy at the number of clients, or a zero
// cell.
func find(cells []cell, strategy string, clients int) cell {
	for _, c := range cells {
		if c.strategy == strategy && c.clients == clients {
			return c
		}
	}
	return cell{}
}

// ratio formats a/b with two decimals, or "-" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

// csvRows returns one row per number of clients and strategy: the mean
// completion time in milliseconds and the mean number of calls, under the
// header of the AWS simulator's results file.
func csvRows(res results) [][]string {
	rows := [][]string{{"clients", "time", "calls", "algorithm"}}
	for _, c := range res.cells {
		rows = append(rows, []string{strconv.Itoa(c.clients), strconv.FormatFloat(c.timeMS, 'f', 3, 64),
			strconv.FormatFloat(c.calls, 'f', 2, 64), c.strategy})
	}
	return rows
}
