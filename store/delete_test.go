package store_test

import (
	"testing"

	"github.com/deputy-run/deputy/store/storetest"
)

// storetest.Delete runs beside storetest.Run, on both dialects.

func TestSQLiteDelete(t *testing.T) {
	t.Parallel()
	storetest.Delete(t, sqliteHarness)
}

func TestPostgresDelete(t *testing.T) {
	t.Parallel()
	storetest.Delete(t, postgresHarness)
}
