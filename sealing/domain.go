package sealing

import (
	"fmt"
	"unicode/utf8"

	"github.com/shredd/shredd"
)

// The domain's value types, states and errors are the root package's
// (package shredd); sealing, which implements shredd.Sealer, names them
// here so that its code and its callers read as before. New code should
// use the shredd names.
type (
	ID              = shredd.ID
	Kind            = shredd.Kind
	Source          = shredd.Source
	Artifact        = shredd.Artifact
	Sealed          = shredd.Sealed
	Opened          = shredd.Opened
	Lease           = shredd.Lease
	Condition       = shredd.Condition
	Forget          = shredd.Forget
	PreviewArtifact = shredd.PreviewArtifact
	Preview         = shredd.Preview
	Holder          = shredd.Holder
	Purge           = shredd.Purge
	AckResult       = shredd.AckResult
	InventoryItem   = shredd.InventoryItem
	Inventory       = shredd.Inventory
)

// ParseID parses the hex form of an ID (shredd.ParseID).
func ParseID(s string) (ID, error) { return shredd.ParseID(s) }

// Forget states and the conditions of erasure (shredd's).
const (
	StateRequested        = shredd.StateRequested
	StateCommitted        = shredd.StateCommitted
	StateShredded         = shredd.StateShredded
	StateErased           = shredd.StateErased
	StateBlocked          = shredd.StateBlocked
	StateOverdue          = shredd.StateOverdue
	CondCascadeClosed     = shredd.CondCascadeClosed
	CondWorkersQuiesced   = shredd.CondWorkersQuiesced
	CondReadPathConverged = shredd.CondReadPathConverged
	CondClosureIntact     = shredd.CondClosureIntact
	CondBackupsEpoch      = shredd.CondBackupsEpoch
)

// The errors of the domain (shredd's): the same values, so errors.Is holds
// across both names.
var (
	ErrInvalid       = shredd.ErrInvalid
	ErrUnknownKind   = shredd.ErrUnknownKind
	ErrUnknownParent = shredd.ErrUnknownParent
	ErrNotFound      = shredd.ErrNotFound
	ErrShredded      = shredd.ErrShredded
	ErrTooLarge      = shredd.ErrTooLarge
	ErrEnvelope      = shredd.ErrEnvelope
	ErrUnavailable   = shredd.ErrUnavailable
	ErrForbidden     = shredd.ErrForbidden
	ErrConflict      = shredd.ErrConflict
	ErrSignature     = shredd.ErrSignature
	ErrNotErased     = shredd.ErrNotErased
	ErrNoLog         = shredd.ErrNoLog
	ErrLedger        = shredd.ErrLedger
)

// truncate shortens what a caller sent for an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// CheckSubject refuses a raw subject id that is empty, longer than
// MaxSubjectID or not valid UTF-8: ids are compared as bytes, and an
// invalid one could alias another after any later normalisation.
func CheckSubject(subject string) error {
	if subject == "" || len(subject) > MaxSubjectID {
		return fmt.Errorf("sealing: subject empty or over %d bytes: %w", MaxSubjectID, ErrInvalid)
	}
	if !utf8.ValidString(subject) {
		return fmt.Errorf("sealing: subject is not valid UTF-8: %w", ErrInvalid)
	}
	return nil
}
