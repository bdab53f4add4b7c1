package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	deputylib "github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/permission"
)

// doctor's permissions and hooks: which settings files are in force, what
// each gives, and what could not be read, so a person can tell why a call
// was asked about or refused, or why a hook did not run.

type permsReport struct {
	Mode string `json:"mode"`
	// ModeFrom is the file the mode came from; "" when none set one.
	ModeFrom string          `json:"mode_from,omitempty"`
	Files    []permsFileJSON `json:"files"`
	Skipped  []skippedJSON   `json:"skipped"`
	// Error is why the rules did not load: runs refuse to start while it
	// stands (a malformed file, a deny rule that cannot be read).
	Error string `json:"error,omitempty"`

	Hooks        []hookJSON    `json:"hooks"`
	HooksSkipped []skippedJSON `json:"hooks_skipped"`
	HooksError   string        `json:"hooks_error,omitempty"`
}

type permsFileJSON struct {
	Path  string `json:"path"`
	Allow int    `json:"allow"`
	Ask   int    `json:"ask"`
	Deny  int    `json:"deny"`
	Mode  string `json:"mode,omitempty"`
}

type skippedJSON struct {
	File  string `json:"file"`
	Line  int    `json:"line,omitempty"`
	Error string `json:"error"` // with its file:line
}

type hookJSON struct {
	Event    string  `json:"event"`
	Matcher  string  `json:"matcher"`
	Type     string  `json:"type"`
	Command  string  `json:"command,omitempty"`
	URL      string  `json:"url,omitempty"` // any password elided
	TimeoutS float64 `json:"timeout_s"`
	Source   string  `json:"source"` // file:line
}

// permissionsReport reads what deputy.LoadPermissions and the hook
// package read for a root in ws.
func permissionsReport(ws string, cfg *deputylib.Config) permsReport {
	home, _ := os.UserHomeDir() // none: no user file
	rep := permsReport{Files: []permsFileJSON{}, Skipped: []skippedJSON{}, Hooks: []hookJSON{}, HooksSkipped: []skippedJSON{}}
	ps, err := deputylib.LoadPermissions(ws, home, cfg)
	if err != nil {
		rep.Error = err.Error()
	} else {
		rep.Mode = string(ps.Policy.Mode)
		for _, f := range ps.Files {
			rep.Files = append(rep.Files, permsFileJSON{Path: f.Path, Allow: f.Allow, Ask: f.Ask, Deny: f.Deny, Mode: string(f.Mode)})
			if rep.ModeFrom == "" && f.Mode != "" {
				rep.ModeFrom = f.Path
			}
		}
		for _, s := range ps.Skipped {
			rep.Skipped = append(rep.Skipped, skipped(s))
		}
	}
	hc, err := hook.LoadSettings(permission.SettingsPaths(ws, home)...)
	if err != nil {
		rep.HooksError = err.Error()
		return rep
	}
	for _, e := range hc.List() {
		h := hookJSON{Event: string(e.Event), Matcher: e.Matcher, Type: e.Hook.Type, Command: e.Hook.Command,
			TimeoutS: e.Hook.Timeout.Seconds(), Source: e.Hook.Source}
		if e.Hook.URL != "" {
			h.URL = e.Hook.URL
			if u, err := url.Parse(e.Hook.URL); err == nil {
				h.URL = u.Redacted()
			}
		}
		rep.Hooks = append(rep.Hooks, h)
	}
	for _, s := range hc.Skipped {
		rep.HooksSkipped = append(rep.HooksSkipped, skipped(s))
	}
	return rep
}

func skipped(err error) skippedJSON {
	var se *permission.SettingsError
	var he *hook.ConfigError
	switch {
	case errors.As(err, &se):
		return skippedJSON{File: se.File, Line: se.Line, Error: err.Error()}
	case errors.As(err, &he):
		return skippedJSON{File: he.File, Line: he.Line, Error: err.Error()}
	}
	return skippedJSON{Error: err.Error()}
}

// print writes the report for a person.
func (r permsReport) print(w io.Writer) {
	fmt.Fprintln(w)
	switch {
	case r.Error != "":
		fmt.Fprintf(w, "permissions: not loaded, and no run starts here until this is fixed:\n  %s\n", r.Error)
	case len(r.Files) == 0:
		fmt.Fprintf(w, "permissions: no settings file and no permissions in deputy.yaml; mode %s\n", r.Mode)
	default:
		from := "no file sets one"
		if r.ModeFrom != "" {
			from = "from " + r.ModeFrom
		}
		fmt.Fprintf(w, "permissions: mode %s (%s)\n", r.Mode, from)
		for _, f := range r.Files {
			fmt.Fprintf(w, "  %s: %d allow, %d ask, %d deny\n", f.Path, f.Allow, f.Ask, f.Deny)
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  skipped (could not be read, the rest loaded): %s\n", s.Error)
	}
	switch {
	case r.HooksError != "":
		fmt.Fprintf(w, "hooks: not loaded: %s\n", r.HooksError)
	case len(r.Hooks) == 0:
		fmt.Fprintln(w, "hooks: none")
	default:
		fmt.Fprintln(w, "hooks:")
		for _, h := range r.Hooks {
			what := h.Command
			if h.Type == hook.TypeHTTP {
				what = h.URL
			}
			m := h.Matcher
			if m == "" {
				m = "*"
			}
			fmt.Fprintf(w, "  %s %s: %s %s (timeout %gs) at %s\n", h.Event, m, h.Type, what, h.TimeoutS, h.Source)
		}
	}
	for _, s := range r.HooksSkipped {
		fmt.Fprintf(w, "  hook skipped: %s\n", s.Error)
	}
}
