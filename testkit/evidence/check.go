package evidence

import (
	"fmt"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
)

// Check runs one case of the corpus through the Go reader, as `shredd
// verify` does: bundle.CheckAttestation for a bare attestation,
// bundle.CheckExport for an export. It returns the reason code
// (bundle.ReasonUsage for the verifier's own malformed inputs: a salt
// that is not 64 hex digits, a subject without a salt, zero witnesses
// required) and the error.
func Check(c OnDisk) (string, error) {
	if (c.Subject == nil) != (c.Salt == nil) {
		return bundle.ReasonUsage, fmt.Errorf("%w: the subject and the salt go together", bundle.ErrUsage)
	}
	var salt []byte
	if c.Salt != nil {
		s, err := attest.ParseSalt(*c.Salt)
		if err != nil {
			return bundle.ReasonUsage, fmt.Errorf("%w: %v", bundle.ErrUsage, err)
		}
		salt = s
	}
	if c.AttestationFile != nil {
		subject := ""
		if c.Subject != nil {
			subject = *c.Subject
		}
		_, err := bundle.CheckAttestation(c.AttestationFile, c.KeyFile, subject, salt)
		return bundle.Reason(err), err
	}
	opts := bundle.Options{Saved: c.SavedFile, WitnessKeys: c.WitnessFiles, Salt: salt}
	if c.Subject != nil {
		opts.Subject = *c.Subject
	}
	if r := c.WitnessesRequired; r != nil {
		if *r < 1 {
			return bundle.ReasonUsage, fmt.Errorf("%w: %d witnesses required", bundle.ErrUsage, *r)
		}
		opts.WitnessesRequired = *r
	}
	_, err := bundle.CheckExport(c.ExportFile, c.KeyFile, c.LogKeyFile, opts)
	return bundle.Reason(err), err
}
