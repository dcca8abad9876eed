package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printTable writes rows under header (nil: none) as aligned columns, two
// spaces apart: the one table format of every listing command (apikeys
// list, endpoints list, dlq list, …). A cell's tabs and newlines become
// spaces, so a value cannot break the columns.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	line := func(cells []string) {
		for i, c := range cells {
			cells[i] = clean.Replace(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if header != nil {
		line(append([]string(nil), header...))
	}
	for _, r := range rows {
		line(r)
	}
	return tw.Flush()
}
