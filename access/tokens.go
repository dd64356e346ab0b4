// Package access is shredd's token store: the bearer tokens of the HTTP
// API, their scopes and the holder a token may be bound to. It owns the
// table tokens, and is the only package whose SQL names it; package api
// asks it to authenticate a request's token and checks the scopes a route
// needs.
package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/storage"
)

// Scopes a token can hold (the root package's, which the HTTP layer
// checks). Admin allows everything.
const (
	ScopeEncrypt  = shredd.ScopeEncrypt
	ScopeDecrypt  = shredd.ScopeDecrypt
	ScopeRegister = shredd.ScopeRegister
	ScopeForget   = shredd.ScopeForget
	ScopeAudit    = shredd.ScopeAudit
	ScopeAdmin    = shredd.ScopeAdmin
)

// The policies of a token for undeclared derivations (the root package's
// Token.Reads).
const (
	ReadsRefuse  = shredd.ReadsRefuse
	ReadsInherit = shredd.ReadsInherit
)

// AllScopes lists the scopes in a stable order.
var AllScopes = shredd.AllScopes

// TokenPrefix starts every bearer token, so that leaked tokens are easy to
// find with secret scanners.
const TokenPrefix = "shredd_"

// Errors of the token store.
var (
	// ErrTokenInvalid means a bearer token is unknown, expired or revoked
	// (the root package's, which the HTTP layer tests).
	ErrTokenInvalid = shredd.ErrTokenInvalid
	// ErrTokenNotFound means no token has the given id.
	ErrTokenNotFound = errors.New("token not found")
)

// Token is a bearer token's record (the root package's Token).
type Token = shredd.Token

// Tokens is the token store, kept in shredd's database (table tokens).
type Tokens struct {
	db  *storage.DB
	now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedToken
}

type cachedToken struct {
	tok     Token
	hash    [32]byte
	expires time.Time
}

// tokenCacheTTL bounds how long a verified token is trusted without reading
// the database again: a revocation takes effect within it.
const tokenCacheTTL = 2 * time.Second

// OpenTokens opens the token store in db.
func OpenTokens(ctx context.Context, db *storage.DB, now func() time.Time) (*Tokens, error) {
	if now == nil {
		now = time.Now
	}
	return &Tokens{db: db, now: now, cache: map[[32]byte]cachedToken{}}, nil
}

// Create makes a new token and returns its record and the secret, which is
// shown once and never stored. ttl 0 means no expiry.
func (ts *Tokens) Create(ctx context.Context, name string, scopes []string, holder string, ttl time.Duration) (Token, string, error) {
	if name == "" || len(name) > 128 {
		return Token{}, "", fmt.Errorf("access: token name must be 1 to 128 bytes: %w", shredd.ErrInvalid)
	}
	if len(scopes) == 0 {
		return Token{}, "", fmt.Errorf("access: a token needs at least one scope: %w", shredd.ErrInvalid)
	}
	for _, sc := range scopes {
		if !slices.Contains(AllScopes, sc) {
			return Token{}, "", fmt.Errorf("access: unknown scope %q (want one of %s): %w", sc, strings.Join(AllScopes, ", "), shredd.ErrInvalid)
		}
	}
	if holder != "" && !shredd.ValidHolder(holder) {
		return Token{}, "", fmt.Errorf("access: holder id: %w", shredd.ErrInvalid)
	}
	if ttl < 0 {
		return Token{}, "", fmt.Errorf("access: negative token ttl: %w", shredd.ErrInvalid)
	}
	var idb [8]byte
	secret := make([]byte, 32)
	if _, err := rand.Read(idb[:]); err != nil {
		return Token{}, "", err
	}
	if _, err := rand.Read(secret); err != nil {
		return Token{}, "", err
	}
	raw := TokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	clear(secret)
	t := Token{ID: hex.EncodeToString(idb[:]), Name: name, Scopes: slices.Clone(scopes), Holder: holder, CreatedAt: ts.now().UTC()}
	slices.Sort(t.Scopes)
	t.Scopes = slices.Compact(t.Scopes)
	var exp any
	if ttl > 0 {
		t.ExpiresAt = t.CreatedAt.Add(ttl)
		exp = t.ExpiresAt.UnixNano()
	}
	h := sha256.Sum256([]byte(raw))
	if _, err := ts.db.ExecContext(ctx, `INSERT INTO tokens(id, hash, name, scopes, holder, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.ID, h[:], t.Name, strings.Join(t.Scopes, ","), t.Holder, t.CreatedAt.UnixNano(), exp); err != nil {
		return Token{}, "", fmt.Errorf("access: create token: %w", err)
	}
	crashpoint.Hit("token:created") // stored, the secret not yet handed out
	return t, raw, nil
}

// Import records a token whose secret already exists (the admin token file
// of an older data directory), by its SHA-256.
func (ts *Tokens) Import(ctx context.Context, name string, scopes []string, hash [32]byte) error {
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return err
	}
	_, err := ts.db.ExecContext(ctx, `INSERT INTO tokens(id, hash, name, scopes, holder, created_at) VALUES (?, ?, ?, ?, '', ?)
		ON CONFLICT DO NOTHING`,
		hex.EncodeToString(idb[:]), hash[:], name, strings.Join(scopes, ","), ts.now().UnixNano())
	if err != nil {
		return fmt.Errorf("access: import token: %w", err)
	}
	crashpoint.Hit("token:imported")
	return nil
}

// Count returns the number of tokens, revoked ones included.
func (ts *Tokens) Count(ctx context.Context) (int, error) {
	var n int
	err := ts.db.QueryRowContext(ctx, `SELECT count(*) FROM tokens`).Scan(&n)
	return n, err
}

func scanToken(sc interface{ Scan(...any) error }) (Token, [32]byte, error) {
	var t Token
	var hash []byte
	var scopes string
	var created int64
	var exp, rev sql.NullInt64
	var reads sql.NullString
	if err := sc.Scan(&t.ID, &hash, &t.Name, &scopes, &t.Holder, &created, &exp, &rev, &reads); err != nil {
		return Token{}, [32]byte{}, err
	}
	t.Reads = reads.String
	t.Scopes = strings.Split(scopes, ",")
	t.CreatedAt = time.Unix(0, created).UTC()
	if exp.Valid {
		t.ExpiresAt = time.Unix(0, exp.Int64).UTC()
	}
	if rev.Valid {
		t.RevokedAt = time.Unix(0, rev.Int64).UTC()
	}
	var h [32]byte
	copy(h[:], hash)
	return t, h, nil
}

const tokenCols = `SELECT id, hash, name, scopes, holder, created_at, expires_at, revoked_at, reads FROM tokens`

// SetReads sets the token's policy for undeclared derivations
// (shredd.ReadsRefuse or shredd.ReadsInherit; docs/api.md "What a read
// costs a writer"). It takes effect within the token cache's lifetime.
func (ts *Tokens) SetReads(ctx context.Context, id, policy string) error {
	if policy != shredd.ReadsRefuse && policy != shredd.ReadsInherit {
		return fmt.Errorf("access: reads policy %q (want %s or %s): %w", policy, shredd.ReadsRefuse, shredd.ReadsInherit, shredd.ErrInvalid)
	}
	res, err := ts.db.ExecContext(ctx, `UPDATE tokens SET reads=? WHERE id=?`, policy, id)
	if err != nil {
		return fmt.Errorf("access: token reads policy: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("access: token %s: %w", id, ErrTokenNotFound)
	}
	ts.mu.Lock()
	clear(ts.cache)
	ts.mu.Unlock()
	return nil
}

// Authenticate returns the token record of a bearer secret, or ErrTokenInvalid for
// a token that is unknown, expired or revoked. The stored hash is compared
// with the presented one in constant time.
func (ts *Tokens) Authenticate(ctx context.Context, raw string) (*Token, error) {
	h := sha256.Sum256([]byte(raw))
	now := ts.now()
	ts.mu.Lock()
	c, ok := ts.cache[h]
	ts.mu.Unlock()
	if !ok || !now.Before(c.expires) {
		t, stored, err := scanToken(ts.db.QueryRowContext(ctx, tokenCols+` WHERE hash=?`, h[:]))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrTokenInvalid
		}
		if err != nil {
			return nil, fmt.Errorf("access: verify token: %w", err)
		}
		c = cachedToken{tok: t, hash: stored, expires: now.Add(tokenCacheTTL)}
		ts.mu.Lock()
		if len(ts.cache) > 10_000 {
			clear(ts.cache)
		}
		ts.cache[h] = c
		ts.mu.Unlock()
	}
	if subtle.ConstantTimeCompare(c.hash[:], h[:]) != 1 {
		return nil, ErrTokenInvalid
	}
	t := c.tok
	if !t.RevokedAt.IsZero() || (!t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)) {
		return nil, ErrTokenInvalid
	}
	return &t, nil
}

// List returns every token record (never a secret), oldest first.
func (ts *Tokens) List(ctx context.Context) ([]Token, error) {
	rows, err := ts.db.QueryContext(ctx, tokenCols+` ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("access: list tokens: %w", err)
	}
	defer rows.Close()
	out := []Token{}
	for rows.Next() {
		t, _, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("access: list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ProbeWrite checks that the database the tokens are kept in accepts a
// write now (storage.DB.ProbeWrite), for GET /readyz: the token store is
// the one handle to the database that package api holds.
func (ts *Tokens) ProbeWrite(ctx context.Context, now time.Time) error {
	return ts.db.ProbeWrite(ctx, now)
}

// Revoke revokes the token with the given id. Servers stop accepting it
// within tokenCacheTTL (2 s).
func (ts *Tokens) Revoke(ctx context.Context, id string) error {
	res, err := ts.db.ExecContext(ctx, `UPDATE tokens SET revoked_at=coalesce(revoked_at, ?) WHERE id=?`, ts.now().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("access: revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("access: revoke token %q: %w", id, ErrTokenNotFound)
	}
	ts.mu.Lock()
	clear(ts.cache)
	ts.mu.Unlock()
	return nil
}
