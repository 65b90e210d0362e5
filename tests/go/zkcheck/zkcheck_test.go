package zkcheck

import (
	"strings"
	"testing"
)

func check(t *testing.T, history string) Result {
	t.Helper()
	ops, err := ReadHistory(strings.NewReader(history))
	if err != nil {
		t.Fatal(err)
	}
	return Check(ops, Options{HTMLDir: t.TempDir()})
}

const created = `{"session":"a","key":"/k","op":"create","value":"init","call":0,"return":10,"outcome":"ok","version":0,"mzxid":1}
`

func TestLinearizableHistoryPasses(t *testing.T) {
	res := check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":40,"outcome":"ok","version":1,"mzxid":2}
{"session":"b","key":"/k","op":"get","synced":true,"call":25,"return":35,"outcome":"ok","value":"init","version":0,"mzxid":1}
{"session":"b","key":"/k","op":"cas","value":"b1","expected_version":0,"call":36,"return":50,"outcome":"fail","error":"BADVERSION"}
{"session":"c","key":"/k","op":"set","value":"c1","call":45,"outcome":"unknown"}
{"session":"b","key":"/k","op":"get","synced":true,"call":60,"return":70,"outcome":"ok","value":"a1","version":1,"mzxid":2}
{"session":"b","key":"/k","op":"cas","value":"b2","expected_version":1,"call":71,"return":80,"outcome":"ok","version":2,"mzxid":4}
{"session":"a","key":"/k","op":"get","synced":true,"call":90,"return":95,"outcome":"ok","value":"b2","version":2,"mzxid":4}
{"session":"a","key":"/j","op":"get","call":90,"return":95,"outcome":"fail","error":"NONODE"}
{"session":"d","key":"/k","op":"get","call":96,"return":97,"outcome":"ok","value":"a1","version":1,"mzxid":2}
`)
	if !res.OK {
		t.Fatalf("violations: %v", res.Violations)
	}
}

// The unknown write c1 may take effect late: a read may see it after everything else.
func TestUnknownWriteMayApplyLate(t *testing.T) {
	res := check(t, created+`
{"session":"c","key":"/k","op":"set","value":"c1","call":20,"outcome":"unknown"}
{"session":"a","key":"/k","op":"get","synced":true,"call":30,"return":40,"outcome":"ok","value":"init","version":0,"mzxid":1}
{"session":"a","key":"/k","op":"get","synced":true,"call":50,"return":60,"outcome":"ok","value":"c1","version":1,"mzxid":3}
`)
	if !res.OK {
		t.Fatalf("violations: %v", res.Violations)
	}
}

func TestStaleSyncedReadAfterAcknowledgedWriteFails(t *testing.T) {
	res := check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":30,"outcome":"ok","version":1,"mzxid":2}
{"session":"b","key":"/k","op":"get","synced":true,"call":40,"return":50,"outcome":"ok","value":"init","version":0,"mzxid":1}
`)
	if res.OK || !strings.Contains(strings.Join(res.Violations, "\n"), "not linearizable") {
		t.Fatalf("stale read passed: %+v", res)
	}
	if len(res.HTMLFiles) != 1 {
		t.Fatalf("no visualization written: %+v", res)
	}
}

// An unsynced read may be stale for another session, but never for the session's own write.
func TestUnsyncedReadOfOwnWriteMustSeeIt(t *testing.T) {
	other := check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":30,"outcome":"ok","version":1,"mzxid":2}
{"session":"b","key":"/k","op":"get","call":40,"return":50,"outcome":"ok","value":"init","version":0,"mzxid":1}
`)
	if !other.OK {
		t.Fatalf("another session's unsynced stale read is allowed: %v", other.Violations)
	}
	own := check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":30,"outcome":"ok","version":1,"mzxid":2}
{"session":"a","key":"/k","op":"get","call":40,"return":50,"outcome":"ok","value":"init","version":0,"mzxid":1}
`)
	if own.OK || !strings.Contains(strings.Join(own.Violations, "\n"), "session a") {
		t.Fatalf("read of own write went back and passed: %+v", own)
	}
}

// A session that saw zxid 5 (on /j) cannot then read /k without the write of /k at zxid 3.
func TestSessionCannotMissWriteBelowSeenZxid(t *testing.T) {
	res := check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":30,"outcome":"ok","version":1,"mzxid":3}
{"session":"a","key":"/j","op":"create","value":"j","call":31,"return":35,"outcome":"ok","version":0,"mzxid":5}
{"session":"b","key":"/j","op":"get","call":40,"return":45,"outcome":"ok","value":"j","version":0,"mzxid":5}
{"session":"b","key":"/k","op":"get","call":50,"return":55,"outcome":"ok","value":"init","version":0,"mzxid":1}
`)
	if res.OK || !strings.Contains(strings.Join(res.Violations, "\n"), "stale read") {
		t.Fatalf("stale cross-key read passed: %+v", res)
	}
}

func TestLostAcknowledgedWriteFails(t *testing.T) {
	// a1 was acknowledged, then every server reads back the value from before it.
	res := check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":30,"outcome":"ok","version":1,"mzxid":2}
{"session":"final-1","key":"/k","op":"get","synced":true,"call":100,"return":110,"outcome":"ok","value":"init","version":0,"mzxid":1}
`)
	if res.OK {
		t.Fatal("lost write passed")
	}
	// Two acknowledged writes with one version: one of them was overwritten without a trace.
	res = check(t, created+`
{"session":"a","key":"/k","op":"set","value":"a1","call":20,"return":30,"outcome":"ok","version":1,"mzxid":2}
{"session":"b","key":"/k","op":"set","value":"b1","call":40,"return":50,"outcome":"ok","version":1,"mzxid":3}
`)
	if res.OK || !strings.Contains(strings.Join(res.Violations, "\n"), "one was lost") {
		t.Fatalf("duplicate version passed: %+v", res)
	}
}

func TestBadInputIsRejected(t *testing.T) {
	for _, line := range []string{
		`{"session":"a","key":"/k","op":"cas","value":"x","call":1,"return":2,"outcome":"ok"}`,
		`{"session":"a","key":"/k","op":"set","value":"x","call":1,"outcome":"ok"}`,
		`{"session":"a","key":"/k","op":"frob","call":1,"return":2,"outcome":"ok"}`,
		`not json`,
	} {
		if _, err := ReadHistory(strings.NewReader(line)); err == nil {
			t.Errorf("accepted %s", line)
		}
	}
}
