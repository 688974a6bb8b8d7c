package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// section is one scenario's part of the report: what it does, its figures,
// and what it noticed.
type section struct {
	Name, What string
	Tables     []table
	Notes      []string
}

type table struct {
	Caption string
	Header  []string
	Rows    [][]string
}

func (t *table) add(cells ...string) { t.Rows = append(t.Rows, cells) }

func (s *section) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// environment is what the figures depend on besides the code: the machine,
// its load, and exactly which Caddy binary ran.
type environment struct {
	Cores                 int
	LoadBefore, LoadAfter string
	Go, OS                string
	Caddy, CaddyVersion   string
	CaddyBuild            string
	Quick                 bool
	Elapsed               time.Duration
}

func newEnvironment(bin string, quick bool) environment {
	return environment{
		Cores: runtime.NumCPU(), LoadBefore: caddyrun.LoadAverage(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Caddy: bin, CaddyVersion: caddyrun.Version(bin), CaddyBuild: buildOf(bin), Quick: quick,
	}
}

// writeReport writes the report as Markdown.
func writeReport(w io.Writer, env environment, sections []*section) {
	fmt.Fprintln(w, "# Hostile traffic against caddy-mcp")
	fmt.Fprintln(w)
	mode := "full"
	if env.Quick {
		mode = "quick (-quick: smaller and shorter; not comparable with a full run)"
	}
	fmt.Fprintf(w, "- machine: %d cores, %s; load average before %s, after %s\n", env.Cores, env.OS, env.LoadBefore, env.LoadAfter)
	fmt.Fprintf(w, "- caddy: %s (%s); %s\n", env.Caddy, env.CaddyVersion, env.CaddyBuild)
	fmt.Fprintf(w, "- client and upstream: this process, %s; everything on loopback\n", env.Go)
	fmt.Fprintf(w, "- run: %s, took %s\n", mode, env.Elapsed.Round(time.Second))
	for _, s := range sections {
		fmt.Fprintf(w, "\n## %s\n\n%s\n", s.Name, s.What)
		for _, t := range s.Tables {
			fmt.Fprintln(w)
			if t.Caption != "" {
				fmt.Fprintf(w, "%s\n\n", t.Caption)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(t.Header, " | "))
			fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(t.Header)))
			for _, r := range t.Rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
			}
		}
		if len(s.Notes) > 0 {
			fmt.Fprintln(w)
			for _, n := range s.Notes {
				fmt.Fprintf(w, "- %s\n", n)
			}
		}
	}
}

// buildOf identifies the binary: the commit Go stamped into it, if any, and
// the start of its SHA-256, so that "before" and "after" reports name the
// builds they measured.
func buildOf(bin string) string {
	var parts []string
	if info, err := buildinfo.ReadFile(bin); err == nil {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				parts = append(parts, s.Key+"="+s.Value)
			}
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no commit stamped")
	}
	if f, err := os.Open(bin); err == nil {
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			parts = append(parts, "sha256 "+hex.EncodeToString(h.Sum(nil))[:12])
		}
		f.Close()
	}
	return strings.Join(parts, ", ")
}

// mib writes a byte count in MiB.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// deltaMiB writes b-a in MiB, signed: heap figures can fall below their
// baseline once the garbage of start-up is collected.
func deltaMiB(a, b uint64) string {
	return fmt.Sprintf("%+.1f MiB", (float64(b)-float64(a))/(1<<20))
}

// perEach writes (b-a)/n bytes, for a figure per connection or per key.
func perEach(a, b uint64, n int) string {
	d := (float64(b) - float64(a)) / float64(n)
	switch {
	case d >= 1<<20 || d <= -(1<<20):
		return fmt.Sprintf("%+.2f MiB", d/(1<<20))
	case d >= 1<<10 || d <= -(1<<10):
		return fmt.Sprintf("%+.1f KiB", d/(1<<10))
	}
	return fmt.Sprintf("%+.0f B", d)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// seconds writes a duration in seconds or milliseconds.
func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// cut shortens s to at most n bytes, saying how much it left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:n], len(s))
}

// code quotes s for a Markdown table cell.
func code(s string) string {
	return "`" + strings.NewReplacer("`", "'", "|", "\\|", "\n", "\\n", "\r", "\\r").Replace(s) + "`"
}
