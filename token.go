package shredd

import (
	"slices"
	"time"
)

// Scopes a bearer token of the HTTP API can hold. Admin allows everything.
const (
	ScopeEncrypt  = "encrypt"
	ScopeDecrypt  = "decrypt"
	ScopeRegister = "register"
	ScopeForget   = "forget"
	ScopeAudit    = "audit"
	ScopeAdmin    = "admin"
)

// AllScopes lists the scopes in a stable order.
var AllScopes = []string{ScopeEncrypt, ScopeDecrypt, ScopeRegister, ScopeForget, ScopeAudit, ScopeAdmin}

// Token is a bearer token's record, as the token store (package access)
// keeps it and the HTTP layer checks it. The secret itself is never
// stored: only its SHA-256.
type Token struct {
	ID     string   `json:"id"` // public handle, for listing and revoking
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	Holder string   `json:"holder,omitempty"` // set: the token acts only as this holder
	// Reads is the token's policy for an undeclared derivation (a write
	// while it holds reads it neither names nor declares independent of):
	// ReadsRefuse (also "") or ReadsInherit.
	Reads     string    `json:"reads,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// The policies of a token for undeclared derivations (Token.Reads).
const (
	ReadsRefuse  = "refuse"  // answer 409 undeclared_derivation (the default)
	ReadsInherit = "inherit" // give the write the undeclared reads' lineage
)

// Has reports whether the token holds scope (admin holds every scope).
func (t *Token) Has(scope string) bool {
	return slices.Contains(t.Scopes, scope) || slices.Contains(t.Scopes, ScopeAdmin)
}
