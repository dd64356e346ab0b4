// Command perfplot draws the plots of docs/performance.md: every NAME.csv
// of a folder (docs/perf) becomes NAME.svg beside it, with the standard
// library only. scripts/perf-plots.sh runs it; -check writes nothing and
// fails when a checked-in SVG is not what its CSV gives (the test of this
// package does the same, so the plots cannot drift from their data).
//
// A CSV starts with lines "# key: value" (title, kind, x, y, ref), then a
// header row and the data rows:
//
//   - kind bars: the first column labels a group, every other column is a
//     series drawn as one bar per group (an empty cell draws none);
//   - kind lines: the first column is x, every other column a series drawn
//     as a line through its non-empty cells;
//   - ref: "VALUE LABEL", a dashed horizontal line (a baseline of 1, a
//     goal).
package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	check := flag.Bool("check", false, "write nothing; fail if an SVG differs from what its CSV gives")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: perfplot [-check] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	stale, err := run(flag.Arg(0), *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfplot:", err)
		os.Exit(1)
	}
	if len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "perfplot: %s differ from their data: run scripts/perf-plots.sh\n", strings.Join(stale, ", "))
		os.Exit(1)
	}
}

// run renders every CSV of dir. With check it writes nothing and returns
// the SVGs that are missing or differ; without, it writes them.
func run(dir string, check bool) (stale []string, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no CSV in %s", dir)
	}
	sort.Strings(names)
	for _, name := range names {
		svg, err := renderFile(name)
		if err != nil {
			return nil, err
		}
		out := strings.TrimSuffix(name, ".csv") + ".svg"
		if check {
			have, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(have, svg) {
				stale = append(stale, filepath.Base(out))
			}
			continue
		}
		if err := os.WriteFile(out, svg, 0o644); err != nil {
			return nil, err
		}
	}
	return stale, nil
}

// chart is one CSV: its settings, series names and rows.
type chart struct {
	title, kind, x, y string
	ref               *float64
	refLabel          string
	series            []string
	labels            []string    // first column, as written
	values            [][]float64 // [row][series]; NaN for an empty cell
}

func renderFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c.svg(), nil
}

// parse reads a chart: the "# key: value" lines, then the CSV.
func parse(r io.Reader) (*chart, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	c := &chart{kind: "bars"}
	var body strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		meta, ok := strings.CutPrefix(line, "# ")
		if !ok {
			body.WriteString(line)
			continue
		}
		key, val, ok := strings.Cut(strings.TrimSuffix(meta, "\n"), ": ")
		if !ok {
			return nil, fmt.Errorf("comment %q is not \"# key: value\"", line)
		}
		if err := c.set(key, val); err != nil {
			return nil, err
		}
	}
	rows, err := csv.NewReader(strings.NewReader(body.String())).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 || len(rows[0]) < 2 {
		return nil, errors.New("want a header of at least two columns and a row")
	}
	c.series = rows[0][1:]
	for _, row := range rows[1:] {
		vals := make([]float64, len(c.series))
		for i, cell := range row[1:] {
			vals[i] = math.NaN()
			if cell == "" {
				continue
			}
			if vals[i], err = strconv.ParseFloat(cell, 64); err != nil {
				return nil, fmt.Errorf("row %q: %w", row[0], err)
			}
		}
		c.labels = append(c.labels, row[0])
		c.values = append(c.values, vals)
	}
	if c.kind == "lines" {
		for _, l := range c.labels {
			if _, err := strconv.ParseFloat(l, 64); err != nil {
				return nil, fmt.Errorf("lines: x %q: %w", l, err)
			}
		}
	}
	return c, nil
}

func (c *chart) set(key, val string) error {
	text := map[string]*string{"title": &c.title, "x": &c.x, "y": &c.y}
	if p, ok := text[key]; ok {
		*p = val
		return nil
	}
	switch key {
	case "kind":
		if val != "bars" && val != "lines" {
			return fmt.Errorf("kind %q: want bars or lines", val)
		}
		c.kind = val
	case "ref":
		num, label, _ := strings.Cut(val, " ")
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return fmt.Errorf("ref: %w", err)
		}
		c.ref, c.refLabel = &v, label
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}
