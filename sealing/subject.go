package sealing

import (
	"fmt"
	"unicode/utf8"

	"github.com/shredd/shredd"
)

// CheckSubject refuses a raw subject id that is empty, longer than
// MaxSubjectID or not valid UTF-8: ids are compared as bytes, and an
// invalid one could alias another after any later normalisation.
func CheckSubject(subject string) error {
	if subject == "" || len(subject) > MaxSubjectID {
		return fmt.Errorf("sealing: subject empty or over %d bytes: %w", MaxSubjectID, shredd.ErrInvalid)
	}
	if !utf8.ValidString(subject) {
		return fmt.Errorf("sealing: subject is not valid UTF-8: %w", shredd.ErrInvalid)
	}
	return nil
}
