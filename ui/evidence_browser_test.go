package ui_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestEvidenceCorpusBrowser runs every case of the shared corpus
// (testdata/evidence) through the page's verifier in Chromium, the page
// opened from disk (file://) as a regulator who saved it would: the
// verdict and the reason code must be the corpus's, which are those of
// `shredd verify` (cmd/shredd's TestVerifyEvidenceCorpus), the Go reader
// and the Python client. No request other than the page's own files may
// leave the tab.
func TestEvidenceCorpusBrowser(t *testing.T) {
	cases := readEvidence(t)
	page := offlinePage(t)
	ctx := tab(t, 1280, 800)

	checkRequests := watchRequests(ctx)
	run(t, ctx, chromedp.Navigate(page))
	waitFor(t, ctx, `typeof ShreddVerify === 'object'`, 30*time.Second)

	for _, c := range cases {
		req, err := json.Marshal(c.request())
		if err != nil {
			t.Fatal(err)
		}
		expr := `(async (q) => {
			const d = (s) => (s === null ? null : Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0)));
			const r = q.op === 'attestation'
				? await ShreddVerify.verifyAttestation(d(q.attestation), { key: d(q.key), subject: q.subject, salt: q.salt })
				: await ShreddVerify.verifyExport(d(q.export), { key: d(q.key), logKey: d(q.log_key), subject: q.subject, salt: q.salt, saved: d(q.saved),
					witnesses: q.witnesses.map(d), witnessesRequired: q.witnesses_required });
			return JSON.stringify({ verified: r.verified, code: r.code, failed: r.failed, detail: r.reason });
		})(` + string(req) + `)`
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: evaluate: %v", c.Name, err)
		}
		var a answer
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("%s: %v: %s", c.Name, err, out)
		}
		if verdict := a.verdict(); verdict != c.Verdict || a.Code != c.Reason {
			t.Errorf("%s (%s): the page in Chromium says %s %s (%s: %s), want %s %s", c.Name, c.About, verdict, a.Code, a.Failed, a.Detail, c.Verdict, c.Reason)
		}
	}
	checkRequests(t)
}
