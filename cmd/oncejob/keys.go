package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// `oncejob keys create|list|revoke` manage the API keys kept in the store. They open the store
// itself, as migrate does (keys are the operator's, not a tenant's, so no
// API key could be trusted to make them): on Postgres beside running
// servers, which see a new or revoked key within --key-cache-ttl; the
// embedded store is one process's, so there it runs while serve is stopped.
func runKeysCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	stf := storeFlags(fs, true)
	stf.existing = true // a key in a store nothing serves would be a key for nobody
	tenantName := fs.String("tenant", "", "the key's tenant (required)")
	role := fs.String("role", string(store.RoleSubmitter), "submitter (submit, get, list, watch) or operator (also cancel, replay, resolve, approve, deliveries, run and schedule changes)")
	name := fs.String("name", "", "a note for people: who or what uses the key")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tenantName == "" {
		return errors.New("--tenant is required: letters, digits, '_', '.', '-', at most 63")
	}
	if err := tenant.KeyTenantError(*tenantName); err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	if !store.Role(*role).Valid() {
		return fmt.Errorf("--role %q: submitter or operator", *role)
	}
	if len(*name) > 200 {
		return errors.New("--name: at most 200 bytes")
	}
	if !printableName(*name) {
		return errors.New("--name: printable UTF-8 only (no control characters: keys list prints it to a terminal)")
	}
	st, _, _, err := stf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	key, id, prefix := tenant.NewStoreKey()
	if _, err := st.APIKeyCreate(ctx, &store.APIKeyCreateParams{
		ID: id, Tenant: *tenantName, Role: store.Role(*role), Name: *name, SHA256: tenant.HashKey(key),
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %s key %s for tenant %s; the key is shown once, below:\n", *role, prefix, *tenantName)
	fmt.Println(key)
	return nil
}

func runKeysList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keys list", flag.ContinueOnError)
	stf := storeFlags(fs, true)
	stf.existing = true // a key in a store nothing serves would be a key for nobody
	tenantName := fs.String("tenant", "", "only this tenant's keys; empty: every tenant's")
	all := fs.Bool("all", false, "include revoked keys")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	st, _, _, err := stf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.APIKeyList(ctx, &store.APIKeyListParams{Tenant: *tenantName, IncludeRevoked: *all})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	cmdline.Say(w, "KEY\tTENANT\tROLE\tCREATED\tLAST USED\tREVOKED\tNAME\n")
	for _, k := range keys {
		cmdline.Say(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tenant.StoreKeyPrefix(k.ID), k.Tenant, k.Role,
			k.CreatedAt.UTC().Format(time.RFC3339), timeOrDash(k.LastUsedAt), timeOrDash(k.RevokedAt), displayName(k.Name))
	}
	return w.Flush()
}

func runKeysRevoke(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keys revoke", flag.ContinueOnError)
	stf := storeFlags(fs, true)
	stf.existing = true // a key in a store nothing serves would be a key for nobody
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.SetOutput(os.Stderr)
		fs.Usage()
		return cmdline.UsageError("want exactly one key prefix (ojk_...), got %d arguments", fs.NArg())
	}
	id, ok := tenant.ParseKeyID(fs.Arg(0))
	if !ok {
		return fmt.Errorf("%q is not a key's prefix (ojk_ and 12 characters, as keys list shows)", fs.Arg(0))
	}
	st, _, _, err := stf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	k, err := st.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no key %s", tenant.StoreKeyPrefix(id))
	}
	if err != nil {
		return err
	}
	fmt.Printf("revoked %s (tenant %s, %s) at %s; servers refuse it within --key-cache-ttl\n",
		tenant.StoreKeyPrefix(k.ID), k.Tenant, k.Role, k.RevokedAt.UTC().Format(time.RFC3339))
	return nil
}

// printableName reports whether a key's name is valid UTF-8 without
// control characters.
func printableName(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError || (r >= 0x2066 && r <= 0x2069) || (r >= 0x202a && r <= 0x202e) {
			return false
		}
	}
	return true
}

// displayName is a key's name as keys list prints it: as it is when
// printable, else Go-quoted, so a name stored before names were checked
// (or written to the table by hand) cannot send escape sequences to the
// terminal or break the table's columns.
func displayName(s string) string {
	if printableName(s) {
		return s
	}
	return strconv.QuoteToASCII(s)
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
