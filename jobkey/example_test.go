package jobkey_test

import (
	"fmt"

	"github.com/oncejob/oncejob/jobkey"
)

// Canonical JSON is what every key hashes: sorted keys, trimmed strings,
// numbers in one form. Two presentations of one request give one key.
func ExampleCanonical() {
	a, _ := jobkey.Canonical(map[string]any{"language": " de ", "pages": 2.0, "currency": "EUR"})
	b, _ := jobkey.Canonical(map[string]any{"currency": "EUR", "pages": 2, "language": "de"})
	fmt.Println(string(a))
	fmt.Println(string(a) == string(b))
	// Output:
	// {"currency":"EUR","language":"de","pages":2}
	// true
}
