package store

import (
	"errors"

	"github.com/deputy-run/deputy/instance"
)

var (
	// ErrNotFound: no instance, run or mail with that id.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition and ErrTerminal are instance's (the state
	// machine's), named here for compatibility.
	ErrIllegalTransition = instance.ErrIllegalTransition
	ErrTerminal          = instance.ErrTerminal
	// ErrConflict: a repeated write (same id, same sequence number) carries
	// content different from what is stored. Repeating a write with the same
	// content is never an error.
	ErrConflict = errors.New("conflicts with what is stored")
	// ErrAlreadyConsumed: the mail was consumed before.
	ErrAlreadyConsumed = errors.New("mail already consumed")
	// ErrNewerSchema: the database was migrated by a newer deputy. Nothing
	// was changed; upgrade deputy to use it.
	ErrNewerSchema = errors.New("database schema is newer than this deputy knows")
	// ErrLocked: another connection or process held the database locked
	// past the busy timeout.
	ErrLocked = errors.New("database is locked")
	// ErrCorrupt: the file is not a SQLite database, or a damaged one.
	ErrCorrupt = errors.New("database file is not a usable SQLite database")
)
