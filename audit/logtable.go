package audit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// MaxErrorWidth is how many characters of an attempt's error WriteLog shows.
const MaxErrorWidth = 100

// WriteLog writes attempts to w as an aligned text table, one line per
// attempt in the given order, under a header: TIME (UTC, milliseconds), EVENT
// ID, TYPE, ATTEMPT, STATUS (HTTP status; "-" when no response), OUTCOME,
// LATENCY MS, ERROR (error class and message, cut to MaxErrorWidth
// characters; "-" when none). Control characters in a cell (tabs, newlines)
// print as spaces, so each attempt stays on one line. With no attempts it
// writes the header alone. It returns the first write error. This is the
// output of `hookrelay log`.
func WriteLog(w io.Writer, attempts []Attempt) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT ID\tTYPE\tATTEMPT\tSTATUS\tOUTCOME\tLATENCY MS\tERROR")
	for _, a := range attempts {
		fmt.Fprintln(tw, strings.Join(LogCells(a), "\t"))
	}
	return tw.Flush()
}

// LogCells are the cells of a in the columns of [WriteLog], each printable
// on one line (control characters as spaces) and the error cut to
// MaxErrorWidth characters. `hookrelay log --follow` prints them too.
func LogCells(a Attempt) []string {
	status := "-"
	if a.HTTPStatus != 0 {
		status = strconv.Itoa(a.HTTPStatus)
	}
	errText := a.ErrorClass
	if a.ErrorMessage != "" {
		if errText != "" {
			errText += ": "
		}
		errText += a.ErrorMessage
	}
	if errText == "" {
		errText = "-"
	}
	return []string{a.AttemptedAt.UTC().Format("2006-01-02T15:04:05.000Z"), cell(a.EventID), cell(a.EventType),
		strconv.Itoa(a.AttemptNumber), status, cell(string(a.Outcome)), strconv.FormatInt(a.LatencyMs, 10),
		truncate(cell(errText), MaxErrorWidth)}
}

// cell makes s printable on one table line.
func cell(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
