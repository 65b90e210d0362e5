package e2e

import (
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

func TestDefaultWorldACLRoundTripsThroughGetACL(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	acl, st, err := c.GetACL(root)
	check(t, err)
	if len(acl) != 1 || acl[0] != (zk.ACL{Perms: zk.PermAll, Scheme: "world", ID: "anyone"}) {
		t.Fatalf("GetACL = %+v, want [{31 world anyone}]", acl)
	}
	if st.Aversion != 0 || st.Czxid == 0 {
		t.Fatalf("GetACL stat = %+v", st)
	}
}

func TestSetACLBumpsAversionOnlyAndChecksIt(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	_, st0, err := c.Exists(root)
	check(t, err)
	ro := zk.WorldACL(zk.PermRead | zk.PermAdmin)
	st1, err := c.SetACL(root, ro, 0)
	check(t, err)
	if st1.Aversion != 1 || st1.Version != st0.Version || st1.Mzxid != st0.Mzxid || st1.Mtime != st0.Mtime {
		t.Fatalf("SetACL stat: aversion %d version %d mzxid %#x mtime %d; want 1, %d, %#x, %d", st1.Aversion, st1.Version, st1.Mzxid, st1.Mtime, st0.Version, st0.Mzxid, st0.Mtime)
	}
	_, err = c.SetACL(root, openACL, 0)
	wantErr(t, "SetACL with stale aversion", err, zk.ErrBadVersion)
	acl, _, err := c.GetACL(root)
	check(t, err)
	if len(acl) != 1 || acl[0].Perms != zk.PermRead|zk.PermAdmin {
		t.Fatalf("GetACL after SetACL = %+v", acl)
	}
	// The new ACL is enforced: no WRITE, no CREATE.
	_, err = c.Set(root, []byte("x"), -1)
	wantErr(t, "Set without WRITE", err, zk.ErrNoAuth)
	_, err = c.Create(root+"/kid", nil, 0, openACL)
	wantErr(t, "Create without CREATE on the parent", err, zk.ErrNoAuth)
	_, err = c.SetACL(root, openACL, 1)
	check(t, err)
}

func TestDigestACLAdmitsOnlyTheAuthenticatedUser(t *testing.T) {
	owner := connect(t, shared.addr)
	root := testRoot(t, owner)
	check(t, owner.AddAuth("digest", []byte("alice:secret")))
	p, err := owner.Create(root+"/private", []byte("s3cret"), 0, zk.DigestACL(zk.PermAll, "alice", "secret"))
	check(t, err)
	d, _, err := owner.Get(p)
	if err != nil || string(d) != "s3cret" {
		t.Fatalf("owner Get = %q, %v", d, err)
	}

	anon := connect(t, shared.addr)
	_, _, err = anon.Get(p)
	wantErr(t, "unauthenticated Get", err, zk.ErrNoAuth)
	_, err = anon.Set(p, []byte("x"), -1)
	wantErr(t, "unauthenticated Set", err, zk.ErrNoAuth)
	_, _, err = anon.Children(p)
	wantErr(t, "unauthenticated Children", err, zk.ErrNoAuth)
	_, _, _, err = anon.GetW(p)
	wantErr(t, "unauthenticated GetW", err, zk.ErrNoAuth)
	_, err = anon.Create(p+"/kid", nil, 0, openACL)
	wantErr(t, "unauthenticated Create under it", err, zk.ErrNoAuth)
	_, err = anon.SetACL(p, openACL, -1)
	wantErr(t, "unauthenticated SetACL", err, zk.ErrNoAuth)

	// Digest auth with a wrong password is accepted but matches nothing.
	wrong := connect(t, shared.addr)
	check(t, wrong.AddAuth("digest", []byte("alice:guess")))
	_, _, err = wrong.Get(p)
	wantErr(t, "Get with wrong password", err, zk.ErrNoAuth)

	// The same user from another connection gets in.
	same := connect(t, shared.addr)
	check(t, same.AddAuth("digest", []byte("alice:secret")))
	_, err = same.Set(p, []byte("new"), -1)
	check(t, err)
}

// DELETE is checked on the parent, not on the node (§5.2).
func TestDeletePermissionIsCheckedOnTheParent(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	kid, err := c.Create(root+"/kid", nil, 0, zk.WorldACL(zk.PermRead))
	check(t, err)
	_, err = c.SetACL(root, zk.WorldACL(zk.PermAll&^zk.PermDelete), -1)
	check(t, err)
	wantErr(t, "Delete without DELETE on the parent", c.Delete(kid, -1), zk.ErrNoAuth)
	_, err = c.SetACL(root, openACL, -1)
	check(t, err)
	check(t, c.Delete(kid, -1)) // the child's own read-only ACL does not matter
}

func TestAuthACLExpandsToTheCallersIdentity(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	check(t, c.AddAuth("digest", []byte("bob:pw")))
	p, err := c.Create(root+"/mine", nil, 0, zk.AuthACL(zk.PermAll))
	check(t, err)
	acl, _, err := c.GetACL(p)
	check(t, err)
	want := zk.DigestACL(zk.PermAll, "bob", "pw")
	if len(acl) != 1 || acl[0] != want[0] {
		t.Fatalf("ACL from AuthACL = %+v, want %+v", acl, want)
	}
	anon := connect(t, shared.addr)
	_, _, err = anon.Get(p)
	wantErr(t, "Get by another identity", err, zk.ErrNoAuth)
}

// Callers without ADMIN see digest ids redacted to user:x (CVE-2019-0201, §5.6).
func TestGetACLRedactsDigestsForCallersWithoutAdmin(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	check(t, c.AddAuth("digest", []byte("carol:pw")))
	acl := append(zk.DigestACL(zk.PermAll, "carol", "pw"), zk.WorldACL(zk.PermRead)...)
	p, err := c.Create(root+"/n", nil, 0, acl)
	check(t, err)
	anon := connect(t, shared.addr)
	got, _, err := anon.GetACL(p)
	check(t, err)
	var digest *zk.ACL
	for i := range got {
		if got[i].Scheme == "digest" {
			digest = &got[i]
		}
	}
	if len(got) != 2 || digest == nil || digest.ID != "carol:x" {
		t.Fatalf("GetACL without ADMIN = %+v, want the digest id redacted to carol:x", got)
	}
	full, _, err := c.GetACL(p)
	check(t, err)
	for _, a := range full {
		if a.Scheme == "digest" && a.ID != acl[0].ID {
			t.Fatalf("GetACL with ADMIN = %+v, want the real digest %s", full, acl[0].ID)
		}
	}
}

func TestInvalidACLsAreRejected(t *testing.T) {
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	cases := map[string][]zk.ACL{
		"empty list":                         {},
		"auth scheme without any auth":       zk.AuthACL(zk.PermAll),
		"digest id without a colon":          {{Perms: zk.PermAll, Scheme: "digest", ID: "nocolon"}},
		"unknown scheme":                     {{Perms: zk.PermAll, Scheme: "nosuchscheme", ID: "x"}},
		"world with an id other than anyone": {{Perms: zk.PermAll, Scheme: "world", ID: "someone"}},
	}
	for name, acl := range cases {
		_, err := c.Create(root+"/n", nil, 0, acl)
		if err != zk.ErrInvalidACL {
			t.Errorf("Create with %s: err = %v, want ErrInvalidACL", name, err)
		}
		_, err = c.SetACL(root, acl, -1)
		if err != zk.ErrInvalidACL {
			t.Errorf("SetACL with %s: err = %v, want ErrInvalidACL", name, err)
		}
	}
	if ok, _, _ := c.Exists(root + "/n"); ok {
		t.Fatal("a create with an invalid ACL left a node behind")
	}
}

func TestExistsRequiresReadPermission(t *testing.T) {
	skipOnApache(t, "exists checks READ only from 3.8.4/3.9.2 (ZOOKEEPER-2590, fact sheet §5.3)")
	c := connect(t, shared.addr)
	root := testRoot(t, c)
	check(t, c.AddAuth("digest", []byte("dave:pw")))
	p, err := c.Create(root+"/n", nil, 0, zk.DigestACL(zk.PermAll, "dave", "pw"))
	check(t, err)
	anon := connect(t, shared.addr)
	_, _, err = anon.Exists(p)
	wantErr(t, "Exists without READ", err, zk.ErrNoAuth)
	ok, _, err := anon.Exists(root + "/missing")
	if err != nil || ok {
		t.Fatalf("Exists of a missing node = %v, %v; want false, nil", ok, err)
	}
}

func TestAddAuthWithUnknownSchemeFailsTheConnection(t *testing.T) {
	c := connect(t, shared.addr)
	err := c.AddAuth("nosuchscheme", []byte("x"))
	if err != zk.ErrAuthFailed {
		t.Fatalf("AddAuth with an unknown scheme: err = %v, want ErrAuthFailed", err)
	}
	if !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("unexpected error text %q", err)
	}
}
