package store_test

import (
	"testing"

	"github.com/deputy-run/deputy/internal/pgtest"
)

// pgtest.Main stops the private Postgres server after the tests and checks
// for leaked goroutines.
func TestMain(m *testing.M) { pgtest.Main(m) }
