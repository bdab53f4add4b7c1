package permission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// SettingsError is a problem at a place in a settings file.
type SettingsError struct {
	File      string
	Line, Col int // Col is 0 when only the line is known
	Err       error
}

func (e *SettingsError) Error() string {
	if e.Col > 0 {
		return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Line, e.Col, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *SettingsError) Unwrap() error { return e.Err }

// Settings is what LoadSettings read.
type Settings struct {
	// Policy holds the merged rules and the mode.
	Policy Policy
	// ModeFrom is the file the mode came from, "" when none set one (the
	// mode is then default).
	ModeFrom string
	// Files are the files that existed and were read, in the order given.
	Files []string
	// Skipped are the allow and ask rules that did not parse, each a
	// *SettingsError; the rest of the file loaded.
	Skipped []error
}

// SettingsPaths gives Claude Code's settings files for a project, highest
// precedence first: .claude/settings.local.json, .claude/settings.json,
// ~/.claude/settings.json. home "" leaves out the user's file.
func SettingsPaths(projectDir, home string) []string {
	p := []string{
		filepath.Join(projectDir, ".claude", "settings.local.json"),
		filepath.Join(projectDir, ".claude", "settings.json"),
	}
	if home != "" {
		p = append(p, filepath.Join(home, ".claude", "settings.json"))
	}
	return p
}

// LoadSettings reads settings files given highest precedence first (as
// SettingsPaths gives them); a file that does not exist is skipped. The
// rules of every file are merged (deny still beats allow wherever each came
// from), and the mode is the defaultMode of the highest-precedence file
// that sets one. Keys other than permissions.allow, .ask, .deny and
// .defaultMode are ignored.
//
// A rule that does not parse is reported with its file and line: an allow
// or ask rule is skipped (in Settings.Skipped) and the rest loads, but a
// deny rule fails the whole load, since going on without it would allow
// what it was written to stop. Malformed JSON, a bad defaultMode or an
// unreadable file fail the load too.
func LoadSettings(paths ...string) (Settings, error) {
	var st Settings
	modeSet := false
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Settings{}, fmt.Errorf("permission settings: %w", err)
		}
		f, err := parseSettings(p, data)
		if err != nil {
			return Settings{}, err
		}
		st.Files = append(st.Files, p)
		firstSkip := len(st.Skipped)
		if f.mode != nil && !modeSet {
			m, err := ParseMode(f.mode.val)
			if err != nil {
				return Settings{}, &SettingsError{File: p, Line: lineOf(data, f.mode.off), Err: err}
			}
			st.Policy.Mode, st.ModeFrom, modeSet = m, p, true
		}
		set := &st.Policy.Set
		for _, group := range []struct {
			list  *[]Rule
			items []jsonString
			deny  bool
		}{{&set.Deny, f.deny, true}, {&set.Ask, f.ask, false}, {&set.Allow, f.allow, false}} {
			for _, it := range group.items {
				line := lineOf(data, it.off)
				var r Rule
				err := errors.New(it.bad)
				if it.bad == "" {
					r, err = ParseRule(it.val)
				}
				if err != nil {
					se := &SettingsError{File: p, Line: line, Err: err}
					if group.deny {
						return Settings{}, fmt.Errorf("%w (a deny rule that cannot be read fails the load)", se)
					}
					st.Skipped = append(st.Skipped, se)
					continue
				}
				r.Source = fmt.Sprintf("%s:%d", p, line)
				*group.list = append(*group.list, r)
			}
		}
		// Report a file's skipped rules in the order they are written.
		slices.SortStableFunc(st.Skipped[firstSkip:], func(a, b error) int {
			return a.(*SettingsError).Line - b.(*SettingsError).Line
		})
	}
	if !modeSet {
		st.Policy.Mode = ModeDefault
	}
	st.Policy.Set = st.Policy.Set.indexed()
	return st, nil
}

// jsonString is a string value and the offset just past it.
type jsonString struct {
	val string
	off int64
	bad string // why the value is not a rule (not a string)
}

type settingsFile struct {
	allow, ask, deny []jsonString
	mode             *jsonString
}

// parseSettings checks the JSON, then walks its tokens to find the
// permissions and the offset of every rule, so errors can name lines.
func parseSettings(file string, data []byte) (settingsFile, error) {
	var f settingsFile
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		return f, jsonError(file, data, err)
	}
	if _, ok := probe.(map[string]any); !ok {
		return f, &SettingsError{File: file, Line: 1, Col: 1, Err: errors.New("settings must be a JSON object")}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the opening '{'
		return f, jsonError(file, data, err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return f, jsonError(file, data, err)
		}
		if key != "permissions" {
			if err := skipValue(dec); err != nil {
				return f, jsonError(file, data, err)
			}
			continue
		}
		if err := f.readPermissions(dec); err != nil {
			var se *SettingsError
			if errors.As(err, &se) {
				se.File, se.Line = file, lineOf(data, dec.InputOffset())
				return f, se
			}
			return f, jsonError(file, data, err)
		}
	}
	return f, nil
}

func (f *settingsFile) readPermissions(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &SettingsError{Err: errors.New(`"permissions" must be an object`)}
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		switch key {
		case "allow":
			f.allow, err = readStrings(dec, "allow")
		case "ask":
			f.ask, err = readStrings(dec, "ask")
		case "deny":
			f.deny, err = readStrings(dec, "deny")
		case "defaultMode":
			var tok json.Token
			tok, err = dec.Token()
			s, ok := tok.(string)
			if err == nil && !ok {
				return &SettingsError{Err: errors.New(`"defaultMode" must be a string`)}
			}
			f.mode = &jsonString{val: s, off: dec.InputOffset()}
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	_, err = dec.Token() // the closing '}'
	return err
}

// readStrings reads an array of rules. A value that is not a string is
// kept as a bad entry, so the loader applies the same skip-or-fail policy
// as for a rule that does not parse.
func readStrings(dec *json.Decoder, name string) ([]jsonString, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, &SettingsError{Err: fmt.Errorf("%q must be an array of rule strings", name)}
	}
	var out []jsonString
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			// Reported at the line where the value ends.
			out = append(out, jsonString{val: string(raw), off: dec.InputOffset(), bad: fmt.Sprintf("rule %s is not a string", raw)})
			continue
		}
		out = append(out, jsonString{val: s, off: dec.InputOffset()})
	}
	_, err = dec.Token() // the closing ']'
	return out, err
}

func skipValue(dec *json.Decoder) error {
	var raw json.RawMessage
	return dec.Decode(&raw)
}

// jsonError turns a decoding error into file:line:col where it can.
func jsonError(file string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the offending byte as read; point at it.
		line, col := lineCol(data, max(se.Offset-1, 0))
		return &SettingsError{File: file, Line: line, Col: col, Err: fmt.Errorf("malformed JSON: %v", se)}
	case errors.As(err, &te):
		line, col := lineCol(data, te.Offset)
		return &SettingsError{File: file, Line: line, Col: col, Err: fmt.Errorf("malformed JSON: %v", te)}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		line, col := lineCol(data, int64(len(data)))
		return &SettingsError{File: file, Line: line, Col: col, Err: errors.New("malformed JSON: unexpected end of input")}
	}
	return fmt.Errorf("%s: %w", file, err)
}

// lineOf gives the 1-based line of the byte just before off (the end of a
// token): a JSON string holds no raw newline, so that is its line.
func lineOf(data []byte, off int64) int {
	l, _ := lineCol(data, max(off-1, 0))
	return l
}

func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}
