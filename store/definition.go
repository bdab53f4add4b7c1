package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Definition is an agent definition kept in the database, so a new type
// needs no restart: the catalog reads the table again from time to time.
type Definition struct {
	Name string `json:"name"`
	// Source is the text it was written in (the Markdown file), for people;
	// Definition is the parsed form, as JSON, for the catalog.
	Source     string          `json:"source,omitempty"`
	Definition json.RawMessage `json:"definition"`
	// UpdatedAt is when the source or the definition last changed; putting
	// the same one again leaves it, so a reader can tell what is new.
	UpdatedAt time.Time `json:"updated_at"`
}

// PutDefinition inserts or replaces the definition called name.
func (s *Store) PutDefinition(ctx context.Context, name, source string, def json.RawMessage) error {
	if name == "" {
		return errors.New("put definition: empty name")
	}
	if len(def) == 0 || !json.Valid(def) {
		return fmt.Errorf("put definition %s: the definition is not valid JSON", name)
	}
	_, err := s.q().exec(ctx, `INSERT INTO deputy_definitions (name, source, definition, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET source = excluded.source, definition = excluded.definition,
			updated_at = excluded.updated_at
		WHERE deputy_definitions.source <> excluded.source OR deputy_definitions.definition <> excluded.definition`,
		name, source, string(def), s.now().UnixMicro())
	if err != nil {
		return fmt.Errorf("put definition %s: %w", name, classify(s.dialect, s.busy, err))
	}
	return nil
}

// Definitions lists the stored definitions by name.
func (s *Store) Definitions(ctx context.Context) ([]Definition, error) {
	rows, err := s.q().query(ctx, `SELECT name, source, definition, updated_at FROM deputy_definitions ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("definitions: %w", err)
	}
	defer rows.Close()
	var out []Definition
	for rows.Next() {
		var d Definition
		var def string
		var at int64
		if err := rows.Scan(&d.Name, &d.Source, &def, &at); err != nil {
			return nil, fmt.Errorf("definitions: %w", err)
		}
		d.Definition, d.UpdatedAt = json.RawMessage(def), fromMicros(at)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("definitions: %w", err)
	}
	return out, nil
}
