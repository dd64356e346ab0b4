package shredd

import (
	"encoding/base64"
	"fmt"
	"time"
)

// HolderQuery selects a page of holders for Holders.ListHolders: by id,
// ascending, at most Limit of them (1 to MaxHolderPage; 0 means
// MaxHolderPage), after the holder Cursor names ("" for the first page).
// Only, when not "", keeps that one holder: what a holder-bound token
// may see.
type HolderQuery struct {
	Limit  int
	Cursor string
	Only   string
}

// MaxHolderPage is the largest page of holders ListHolders answers.
const MaxHolderPage = 1000

// HolderPage is one page of holders. Next is the cursor of the following
// page, "" on the last one.
type HolderPage struct {
	Holders []HolderStatus
	Next    string
}

// HolderStatus is a registered holder as an operator watches it: the purge
// work it still owes, when it last acked and what it last reported.
type HolderStatus struct {
	ID        string
	CreatedAt time.Time
	// PendingArtifacts counts the holder's plaintext-held artifacts that
	// open forgets (committed, not erased) still wait for it to purge and
	// ack, one per artifact and forget: the sum, over Purges, of the
	// artifacts of each forget. PendingForgets counts those forgets.
	PendingArtifacts int
	PendingForgets   int
	// LastAck is when shredd received the holder's latest signed ack; the
	// zero time when it never sent one.
	LastAck time.Time
	// Inventory is the holder's latest inventory report, nil when it never
	// reported one.
	Inventory *InventoryStatus
}

// InventoryStatus is what shredd kept of a holder's latest inventory
// report: when, how many items, and how many of them it could not account
// for. UnknownArtifacts counts the artifacts never registered for the
// holder and those it acked as purged but still listed; UnknownKinds the
// kinds never registered. Either above 0 blocks every open forget.
type InventoryStatus struct {
	ReportedAt       time.Time
	Items            int
	UnknownArtifacts int
	UnknownKinds     int
}

// Clean reports whether the report accounts for everything the holder
// holds (it blocks no forget).
func (s InventoryStatus) Clean() bool { return s.UnknownArtifacts == 0 && s.UnknownKinds == 0 }

// HolderCursor returns the cursor of the page that starts after holder id:
// the unpadded base64url of the id, opaque to clients.
func HolderCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// ParseHolderCursor returns the holder id a cursor names; anything that is
// not the cursor of a valid holder id is an error wrapping ErrInvalid.
func ParseHolderCursor(s string) (string, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || !ValidHolder(string(b)) || HolderCursor(string(b)) != s {
		return "", fmt.Errorf("shredd: malformed holder cursor: %w", ErrInvalid)
	}
	return string(b), nil
}
