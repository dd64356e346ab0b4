package erasure

import "github.com/shredd/shredd"

// The domain's value types, states and errors are the root package's
// (package shredd); erasure names them here so that its code reads as in
// sealing. New code should use the shredd names.
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
