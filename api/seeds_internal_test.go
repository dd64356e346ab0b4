package api

import "strings"

// FuzzSeeds holds the seed bodies of the body fuzz targets, by route:
// valid and near-valid bodies. The route targets (fuzz_test.go) and the
// decoder's differential target (FuzzDecoderDifferential) share them, so
// that a body found worth keeping for one is fed to the other. {art} and
// {ct} stand for an artifact id and a ciphertext.
var FuzzSeeds = map[string][]string{
	"kind": {
		``, `{}`, `{"description":""}`, `{"description":"rolling summaries"}`, `{"description":null}`,
		`{"description":7}`, `{"description":"x","extra":1}`, `{"description":"\u00e9\ud800"}`, `{"description":"x"}{}`,
		`[]`, `null`, `{"description":"` + strings.Repeat("d", 1025) + `"}`, `{"description":[[[[]]]]}`,
	},
	"encrypt": {
		seedOne,
		`{"subjects":["a","b"],"parents":["{art}"],"kind":"episodic","plaintext":"","context":"Y3R4","holder":"ann-1"}`,
		`{"parents":["{art}"],"kind":"summary","plaintext":"dGVh"}`,
		`{"subject":"a","kind":"episodic","plaintext":"%%%"}`,
		`{"subject":"a","kind":"episodic","plaintext":"YQ"}`,
		`{"subject":"","kind":"episodic","plaintext":""}`,
		`{"subject":"a","kind":"Bad Kind","plaintext":""}`,
		`{"parents":["xyz"],"kind":"episodic","plaintext":""}`,
		`{"parents":["00000000000000000000000000000001"],"kind":"episodic","plaintext":""}`,
		`{"subject":"a","kind":7}`, `{"subject":"a","kind":"episodic","plaintext":"","extra":1}`,
		`{"kind":`, `{"subjects":[[[[[[]]]]]]}`, `{"subject":"a\u0000b","kind":"episodic","plaintext":""}`,
		`{"subject":"a","kind":"episodic","plaintext":"","holder":"bad holder"}`,
		seedBatch(seedOne), seedBatch(seedOne, `{"subject":"a","kind":"nokind","plaintext":""}`, `{"kind":"episodic","plaintext":"!"}`),
		`{"batch_input":[]}`, `{"batch_input":null}`, `{"batch_input":{}}`, `{"batch_input":[null]}`, `{"batch_input":[5]}`,
		`{"batch_input":[` + seedOne + `],"kind":"episodic"}`, `{"batch_input":[{"batch_input":[]}]}`, `{"batch\u005finput":[]}`,
		`{"Batch_Input":[` + seedOne + `]}`, `{"batch_input":[` + seedOne + `],"batch_input":[]}`,
	},
	"decrypt": {
		`{"ciphertext":"{ct}"}`, `{"ciphertext":"{ct}","context":""}`, `{"ciphertext":"{ct}","context":"Y3R4"}`,
		`{"ciphertext":"{ct}","context":"!"}`, `{"ciphertext":"shredd:v1:AAAA"}`, `{"ciphertext":"shredd:v1:"}`,
		`{"ciphertext":"shredd:v2:AAAA"}`, `{"ciphertext":""}`, `{}`, `{"ciphertext":7}`, `{"ciphertext":"x","extra":1}`,
		seedBatch(`{"ciphertext":"{ct}"}`), seedBatch(`{"ciphertext":"{ct}"}`, `{"ciphertext":"shredd:v1:AAAA"}`, `{}`, `{"ciphertext":"{ct}","context":"%"}`),
		`{"batch_input":[]}`, `{"batch_input":[null]}`, `{"ciphertext":"{ct}","batch_input":[{"ciphertext":"{ct}"}]}`,
		`{"batch_input":[{"ciphertext":"{ct}","extra":1}]}`,
	},
	"artifact": {
		`{"parents":["{art}"],"kind":"episodic","holder":"ann-1"}`,
		`{"subject":"alice@example.com","subjects":["b"],"kind":"episodic","holder":"cache-1"}`,
		`{"parents":["{art}"],"kind":"episodic"}`, `{"parents":["{art}","{art}"],"kind":"episodic","holder":"h"}`,
		`{"subject":"a","kind":"nokind","holder":"h"}`, `{"subject":"a","kind":"episodic","holder":"-bad"}`,
		`{"parents":["zz"],"kind":"episodic","holder":"h"}`, `{"kind":"episodic","holder":"h"}`,
		`{"parents":"{art}","kind":"episodic","holder":"h"}`, `{"parents":["{art}"],"kind":"episodic","holder":"h","plaintext":""}`,
	},
	"forget": {
		`{"subject":"alice@example.com"}`, `{"subject":"zed@example.com"}`, `{"subject":""}`, `{}`, `{"subject":7}`,
		`{"subject":"a","extra":1}`, `{"subject":"a"}{"subject":"b"}`, `{"subject":"` + strings.Repeat("s", 1025) + `"}`,
		`{"subject":"\u00e9"}`, `{"subject":null}`,
	},
}

// seedOne is a valid encrypt request.
const seedOne = `{"subject":"alice@example.com","kind":"episodic","plaintext":"dGVh"}`

func seedBatch(items ...string) string {
	return `{"batch_input":[` + strings.Join(items, ",") + `]}`
}
