/* End-to-end tests of a ZooKeeper-compatible server through the real Apache ZooKeeper C client
 * (libzookeeper_mt 3.8), so that what C programs rely on is checked against zoolog and Apache alike.
 *
 *   zkc_e2e HOST:PORT [ALL_MEMBERS]
 *
 * HOST:PORT is the server every test talks to. ALL_MEMBERS (optional, "h1:p1,h2:p2,h3:p3") lists every
 * member of an ensemble: with it, session_moves_between_members resumes a session on another member and
 * sync_makes_other_session_write_visible writes through another member; without it the first is skipped.
 * ZKC_SKIP=name,name names known failures to skip (reported as "skip", never silently); an unknown
 * name is an error, so that a typo cannot hide a failure.
 *
 * Each test runs on fresh paths under /zkc-<pid>-<test name> and prints "ok NAME", "FAIL NAME: ..." or
 * "skip NAME: ..."; the exit status is 1 if any test failed. Every wait is bounded (WAIT_TIMEOUT_MS),
 * and alarm(SUITE_TIMEOUT_S) ends a run that hangs anyway. The server must run with
 * -Dzookeeper.extendedTypesEnabled=true and -Dznode.container.checkIntervalMs=1000 (tests/c/run.sh
 * starts it so) for the container and TTL tests.
 */
#define _POSIX_C_SOURCE 200809L
/* zookeeper.h declares the synchronous calls only for the multi-threaded library. */
#define THREADED
#include <zookeeper/zookeeper.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    /* Asked for at connect; the server grants it unchanged (within its 2..20 tickTime bounds). */
    SESSION_TIMEOUT_MS = 10000,
    WAIT_TIMEOUT_MS = 10000,
    /* The container/TTL reaper runs every second in tests/c/run.sh's server. */
    REAPER_TIMEOUT_MS = 15000,
    ASYNC_BATCH_TIMEOUT_MS = 30000,
    SUITE_TIMEOUT_S = 120,
    MAX_SESSIONS = 4,
    MAX_EVENTS = 32,
    MAX_PATH_CHARS = 512,
    MAX_ROOT_CHARS = 128,
    ASYNC_BATCH_SIZE = 1000,
    LARGE_VALUE_BYTES = 512 * 1024,
};

/* base64(sha1("zkc-user:zkc-secret")): the id the digest scheme stores for these credentials. */
static const char DIGEST_CREDENTIALS[] = "zkc-user:zkc-secret";
static const char DIGEST_ID[] = "zkc-user:S0f6ZgdE30auY/aFdYUDKRtVzfA=";

/* ------------------------------------------------------------------------------------------------
 * Names for codes, so that a failure says what came back. */

struct code_name {
    int code;
    const char *name;
};

static const struct code_name RC_NAMES[] = {
    {ZOK, "ZOK"}, {ZSYSTEMERROR, "ZSYSTEMERROR"}, {ZRUNTIMEINCONSISTENCY, "ZRUNTIMEINCONSISTENCY"},
    {ZDATAINCONSISTENCY, "ZDATAINCONSISTENCY"}, {ZCONNECTIONLOSS, "ZCONNECTIONLOSS"},
    {ZMARSHALLINGERROR, "ZMARSHALLINGERROR"}, {ZUNIMPLEMENTED, "ZUNIMPLEMENTED"},
    {ZOPERATIONTIMEOUT, "ZOPERATIONTIMEOUT"}, {ZBADARGUMENTS, "ZBADARGUMENTS"},
    {ZINVALIDSTATE, "ZINVALIDSTATE"}, {ZNONODE, "ZNONODE"}, {ZNOAUTH, "ZNOAUTH"},
    {ZBADVERSION, "ZBADVERSION"}, {ZNOCHILDRENFOREPHEMERALS, "ZNOCHILDRENFOREPHEMERALS"},
    {ZNODEEXISTS, "ZNODEEXISTS"}, {ZNOTEMPTY, "ZNOTEMPTY"}, {ZSESSIONEXPIRED, "ZSESSIONEXPIRED"},
    {ZINVALIDCALLBACK, "ZINVALIDCALLBACK"}, {ZINVALIDACL, "ZINVALIDACL"}, {ZAUTHFAILED, "ZAUTHFAILED"},
    {ZCLOSING, "ZCLOSING"}, {ZNOTHING, "ZNOTHING"}, {ZSESSIONMOVED, "ZSESSIONMOVED"},
    {ZNOTREADONLY, "ZNOTREADONLY"}, {ZNOWATCHER, "ZNOWATCHER"}, {ZTHROTTLEDOP, "ZTHROTTLEDOP"},
};

static const char *name_in(const struct code_name *names, size_t count, int code) {
    for (size_t i = 0; i < count; i++) {
        if (names[i].code == code) return names[i].name;
    }
    return "unknown";
}

static const char *rc_name(int rc) {
    return name_in(RC_NAMES, sizeof RC_NAMES / sizeof RC_NAMES[0], rc);
}

/* The C API exports event types and states as variables, not constants, so the tables are filled
 * at run time. */
static const char *event_name(int type) {
    const struct code_name names[] = {
        {ZOO_CREATED_EVENT, "ZOO_CREATED_EVENT"}, {ZOO_DELETED_EVENT, "ZOO_DELETED_EVENT"},
        {ZOO_CHANGED_EVENT, "ZOO_CHANGED_EVENT"}, {ZOO_CHILD_EVENT, "ZOO_CHILD_EVENT"},
        {ZOO_SESSION_EVENT, "ZOO_SESSION_EVENT"}, {ZOO_NOTWATCHING_EVENT, "ZOO_NOTWATCHING_EVENT"},
    };
    return name_in(names, sizeof names / sizeof names[0], type);
}

static const char *state_name(int state) {
    const struct code_name names[] = {
        {0, "no session event yet"}, {ZOO_CONNECTING_STATE, "ZOO_CONNECTING_STATE"},
        {ZOO_ASSOCIATING_STATE, "ZOO_ASSOCIATING_STATE"}, {ZOO_CONNECTED_STATE, "ZOO_CONNECTED_STATE"},
        {ZOO_EXPIRED_SESSION_STATE, "ZOO_EXPIRED_SESSION_STATE"},
        {ZOO_AUTH_FAILED_STATE, "ZOO_AUTH_FAILED_STATE"}, {ZOO_READONLY_STATE, "ZOO_READONLY_STATE"},
        {ZOO_NOTCONNECTED_STATE, "ZOO_NOTCONNECTED_STATE"},
    };
    return name_in(names, sizeof names / sizeof names[0], state);
}

/* ------------------------------------------------------------------------------------------------
 * Bounded waiting: every struct the client's threads fill embeds a `monitor`, and the test thread
 * waits on it with a deadline. */

struct monitor {
    pthread_mutex_t lock;
    pthread_cond_t changed;
};

static void monitor_init(struct monitor *m) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&m->changed, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&m->lock, NULL);
}

/* For the client's threads, which change the struct with the lock held. */
static void notify_and_unlock(struct monitor *m) {
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
}

static int64_t monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Waits until ready(arg) holds, checked under the lock; false if timeout_ms passes first. */
static bool wait_until(struct monitor *m, bool (*ready)(const void *), const void *arg, int timeout_ms) {
    int64_t deadline_ms = monotonic_ms() + timeout_ms;
    struct timespec deadline = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    pthread_mutex_lock(&m->lock);
    int waited = 0;
    while (!ready(arg) && waited != ETIMEDOUT) {
        waited = pthread_cond_timedwait(&m->changed, &m->lock, &deadline);
    }
    bool holds = ready(arg);
    pthread_mutex_unlock(&m->lock);
    return holds;
}

/* ------------------------------------------------------------------------------------------------
 * One test: its sessions and allocations, released by the runner however the test ends, and the
 * jump back to the runner on the first failed expectation. */

struct session;

struct test {
    const char *hosts;   /* argv[1] */
    const char *members; /* argv[2], or NULL */
    char root[MAX_ROOT_CHARS];
    struct session *main; /* connected, root created, before the test body runs */
    struct session *sessions[MAX_SESSIONS];
    int session_count;
    void **allocations;
    size_t allocation_count;
    size_t allocation_capacity;
    jmp_buf abort_test;
    char message[4096];
};

enum { TEST_FAILED = 1, TEST_SKIPPED = 2 };

static void format_message(struct test *t, const char *fmt, va_list args) {
    vsnprintf(t->message, sizeof t->message, fmt, args);
}

static _Noreturn __attribute__((format(printf, 2, 3))) void fail(struct test *t, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    format_message(t, fmt, args);
    va_end(args);
    longjmp(t->abort_test, TEST_FAILED);
}

static _Noreturn __attribute__((format(printf, 2, 3))) void skip(struct test *t, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    format_message(t, fmt, args);
    va_end(args);
    longjmp(t->abort_test, TEST_SKIPPED);
}

static void *t_alloc(struct test *t, size_t size) {
    if (t->allocation_count == t->allocation_capacity) {
        size_t capacity = t->allocation_capacity ? 2 * t->allocation_capacity : 16;
        void **grown = realloc(t->allocations, capacity * sizeof *grown);
        if (!grown) fail(t, "out of memory");
        t->allocations = grown;
        t->allocation_capacity = capacity;
    }
    void *p = calloc(1, size);
    if (!p) fail(t, "out of memory (%zu bytes)", size);
    t->allocations[t->allocation_count++] = p;
    return p;
}

static __attribute__((format(printf, 2, 3))) const char *t_printf(struct test *t, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int length = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    char *text = t_alloc(t, (size_t)length + 1);
    va_start(args, fmt);
    vsnprintf(text, (size_t)length + 1, fmt, args);
    va_end(args);
    return text;
}

/* The path of a node under the test's root. */
static const char *node(struct test *t, const char *name) {
    return t_printf(t, "%s/%s", t->root, name);
}

/* ------------------------------------------------------------------------------------------------
 * Expectations: each ends the test with what was expected and what came back. */

static void expect_rc(struct test *t, const char *what, int got, int want) {
    if (got != want) {
        fail(t, "%s: expected %s (%s), got %s (%s)", what, rc_name(want), zerror(want), rc_name(got),
             zerror(got));
    }
}

static void expect_int(struct test *t, const char *what, int64_t got, int64_t want) {
    if (got != want) fail(t, "%s: expected %" PRId64 ", got %" PRId64, what, want, got);
}

static void expect_str(struct test *t, const char *what, const char *got, const char *want) {
    if (strcmp(got, want) != 0) fail(t, "%s: expected \"%s\", got \"%s\"", what, want, got);
}

#define STAT_FIELDS(X)                                                                                 \
    X(czxid) X(mzxid) X(ctime) X(mtime) X(version) X(cversion) X(aversion) X(ephemeralOwner)         \
    X(dataLength) X(numChildren) X(pzxid)

static void expect_same_stat(struct test *t, const char *what, const struct Stat *got,
                             const struct Stat *want) {
#define COMPARE_FIELD(field)                                                                           \
    if (got->field != want->field) {                                                                   \
        fail(t, "%s: stat." #field " expected %" PRId64 ", got %" PRId64, what, (int64_t)want->field,   \
             (int64_t)got->field);                                                                     \
    }
    STAT_FIELDS(COMPARE_FIELD)
#undef COMPARE_FIELD
}

/* ------------------------------------------------------------------------------------------------
 * Sessions: a handle and the last state its global watcher reported. */

struct session {
    zhandle_t *zh;
    struct monitor monitor;
    int state; /* 0 until the first session event */
};

/* zookeeper_init hands its context to the global watcher. */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *context) {
    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT) return;
    struct session *s = context;
    pthread_mutex_lock(&s->monitor.lock);
    s->state = state;
    notify_and_unlock(&s->monitor);
}

struct state_wait {
    const struct session *session;
    int want;
};

/* Expired and auth-failed handles never change state again, so waiting longer is pointless. */
static bool state_reached_or_final(const void *arg) {
    const struct state_wait *w = arg;
    int state = w->session->state;
    return state == w->want || state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

static void expect_session_state(struct test *t, struct session *s, int want, const char *what) {
    struct state_wait w = {s, want};
    wait_until(&s->monitor, state_reached_or_final, &w, WAIT_TIMEOUT_MS);
    pthread_mutex_lock(&s->monitor.lock);
    int state = s->state;
    pthread_mutex_unlock(&s->monitor.lock);
    if (state != want) {
        fail(t, "%s: expected session state %s within %d ms, got %s", what, state_name(want),
             WAIT_TIMEOUT_MS, state_name(state));
    }
}

/* A handle whose connection a test breaks on purpose logs ZOO_ERROR lines that are no news; its
 * log goes nowhere, so that what the client logs on stderr is always worth reading. */
enum client_log { CLIENT_LOG_TO_STDERR, CLIENT_LOG_DROPPED };

static void drop_client_log(const char *message) {
    (void)message;
}

/* Zero fields are the defaults: a new session, logged to stderr, asking for SESSION_TIMEOUT_MS. */
struct session_options {
    const clientid_t *resume; /* a session to take over */
    enum client_log log;
    int timeout_ms;
};

/* Starts a handle without waiting for it to connect. */
static struct session *start_session(struct test *t, const char *hosts, struct session_options options) {
    if (t->session_count == MAX_SESSIONS) fail(t, "a test may open at most %d sessions", MAX_SESSIONS);
    struct session *s = t_alloc(t, sizeof *s);
    monitor_init(&s->monitor);
    int timeout_ms = options.timeout_ms ? options.timeout_ms : SESSION_TIMEOUT_MS;
    s->zh = zookeeper_init2(hosts, session_watcher, timeout_ms, options.resume, s, 0,
                            options.log == CLIENT_LOG_DROPPED ? drop_client_log : NULL);
    if (!s->zh) fail(t, "zookeeper_init(\"%s\") returned NULL: %s", hosts, strerror(errno));
    t->sessions[t->session_count++] = s;
    return s;
}

static struct session *connect_session(struct test *t, const char *hosts) {
    struct session *s = start_session(t, hosts, (struct session_options){0});
    expect_session_state(t, s, ZOO_CONNECTED_STATE, t_printf(t, "connecting to %s", hosts));
    return s;
}

static void close_session(struct test *t, struct session *s) {
    if (!s->zh) return;
    int rc = zookeeper_close(s->zh);
    s->zh = NULL;
    expect_rc(t, "zookeeper_close", rc, ZOK);
}

static int64_t session_id(const struct session *s) {
    return zoo_client_id(s->zh)->client_id;
}

/* ------------------------------------------------------------------------------------------------
 * Watch logs: a watcher that records every event it is given, in order. */

struct watch_event {
    int type;
    int state;
    char path[MAX_PATH_CHARS];
};

struct watch_log {
    struct monitor monitor;
    int count;
    int consumed; /* events already matched by expect_event; only the test thread moves it */
    struct watch_event events[MAX_EVENTS];
};

static void watch_logger(zhandle_t *zh, int type, int state, const char *path, void *context) {
    (void)zh;
    struct watch_log *log = context;
    pthread_mutex_lock(&log->monitor.lock);
    if (log->count < MAX_EVENTS) {
        struct watch_event *e = &log->events[log->count++];
        e->type = type;
        e->state = state;
        snprintf(e->path, sizeof e->path, "%s", path ? path : "(null)");
    }
    notify_and_unlock(&log->monitor);
}

static struct watch_log *new_watch_log(struct test *t) {
    struct watch_log *log = t_alloc(t, sizeof *log);
    monitor_init(&log->monitor);
    return log;
}

static bool has_unconsumed_event(const void *arg) {
    const struct watch_log *log = arg;
    return log->count > log->consumed;
}

static void expect_event_within(struct test *t, struct watch_log *log, int type, const char *path,
                                int timeout_ms) {
    if (!wait_until(&log->monitor, has_unconsumed_event, log, timeout_ms)) {
        fail(t, "expected %s on %s within %d ms, got no event", event_name(type), path, timeout_ms);
    }
    pthread_mutex_lock(&log->monitor.lock);
    struct watch_event e = log->events[log->consumed++];
    pthread_mutex_unlock(&log->monitor.lock);
    if (e.type != type || strcmp(e.path, path) != 0 || e.state != ZOO_CONNECTED_STATE) {
        fail(t, "expected %s on %s (state %s), got %s on %s (state %s)", event_name(type), path,
             state_name(ZOO_CONNECTED_STATE), event_name(e.type), e.path, state_name(e.state));
    }
}

static void expect_event(struct test *t, struct watch_log *log, int type, const char *path) {
    expect_event_within(t, log, type, path, WAIT_TIMEOUT_MS);
}

/* Arms a one-shot exists watch recording into `log`; want_rc is ZOK, or ZNONODE for a missing node. */
static struct Stat watch_exists(struct test *t, struct session *s, const char *path, struct watch_log *log,
                                int want_rc) {
    struct Stat stat = {0};
    int rc = zoo_wexists(s->zh, path, watch_logger, log, &stat);
    expect_rc(t, t_printf(t, "zoo_wexists %s", path), rc, want_rc);
    return stat;
}

/* ------------------------------------------------------------------------------------------------
 * Completions of asynchronous calls. */

struct completion {
    struct monitor monitor;
    bool done;
    int rc;
    char value[MAX_PATH_CHARS];
};

static struct completion *new_completion(struct test *t) {
    struct completion *c = t_alloc(t, sizeof *c);
    monitor_init(&c->monitor);
    return c;
}

static void complete(struct completion *c, int rc, const char *value) {
    pthread_mutex_lock(&c->monitor.lock);
    c->done = true;
    c->rc = rc;
    snprintf(c->value, sizeof c->value, "%s", value ? value : "");
    notify_and_unlock(&c->monitor);
}

static void on_void_completion(int rc, const void *data) {
    complete((struct completion *)data, rc, NULL);
}

static void on_string_completion(int rc, const char *value, const void *data) {
    complete((struct completion *)data, rc, value);
}

static bool is_done(const void *arg) {
    return ((const struct completion *)arg)->done;
}

/* Waits for the completion and returns its rc; `what` names the call if it never completes. */
static int await_completion(struct test *t, struct completion *c, const char *what) {
    if (!wait_until(&c->monitor, is_done, c, WAIT_TIMEOUT_MS)) {
        fail(t, "%s: no completion within %d ms", what, WAIT_TIMEOUT_MS);
    }
    return c->rc;
}

/* zoo_async (sync) on `path`; returns its completion once it has run. */
static struct completion *sync_path(struct test *t, struct session *s, const char *path) {
    struct completion *c = new_completion(t);
    expect_rc(t, "zoo_async (sync) submitted", zoo_async(s->zh, path, on_string_completion, c), ZOK);
    expect_rc(t, t_printf(t, "sync of %s", path), await_completion(t, c, "zoo_async (sync)"), ZOK);
    return c;
}

/* The server writes a notification before any later reply on the connection, and the client's
 * completion thread runs watchers and asynchronous completions in arrival order: once a sync
 * submitted now has completed, every event caused by earlier requests has been delivered. */
static void expect_no_more_events(struct test *t, struct session *s, struct watch_log *log,
                                  const char *why) {
    sync_path(t, s, "/");
    pthread_mutex_lock(&log->monitor.lock);
    bool extra = log->count > log->consumed;
    struct watch_event e = extra ? log->events[log->consumed] : (struct watch_event){0};
    pthread_mutex_unlock(&log->monitor.lock);
    if (extra) fail(t, "%s: expected no event, got %s on %s", why, event_name(e.type), e.path);
}

/* ------------------------------------------------------------------------------------------------
 * Node operations that must succeed; `value` NULL means null data (length -1). */

static int value_length(const char *value) {
    return value ? (int)strlen(value) : -1;
}

/* Creates with the open ACL and returns the created path (it differs for sequential modes). */
static const char *create_as(struct test *t, struct session *s, const char *path, const char *value,
                             int mode) {
    char *created = t_alloc(t, MAX_PATH_CHARS);
    int rc = zoo_create(s->zh, path, value, value_length(value), &ZOO_OPEN_ACL_UNSAFE, mode, created,
                        MAX_PATH_CHARS);
    expect_rc(t, t_printf(t, "create %s (mode %d)", path, mode), rc, ZOK);
    return created;
}

static void create_node(struct test *t, struct session *s, const char *path, const char *value) {
    expect_str(t, "created path", create_as(t, s, path, value, ZOO_PERSISTENT), path);
}

static struct Stat exists_stat(struct test *t, struct session *s, const char *path) {
    struct Stat stat;
    expect_rc(t, t_printf(t, "exists %s", path), zoo_exists(s->zh, path, 0, &stat), ZOK);
    return stat;
}

static void expect_no_node(struct test *t, struct session *s, const char *path) {
    struct Stat stat;
    expect_rc(t, t_printf(t, "exists %s", path), zoo_exists(s->zh, path, 0, &stat), ZNONODE);
}

/* Reads into a buffer owned by the test; *length_out gets the length (-1 for null data). */
static const char *get_data(struct test *t, struct session *s, const char *path, int capacity,
                            int *length_out, struct Stat *stat) {
    char *buffer = t_alloc(t, (size_t)capacity + 1);
    int length = capacity;
    expect_rc(t, t_printf(t, "get %s", path), zoo_get(s->zh, path, 0, buffer, &length, stat), ZOK);
    *length_out = length;
    return buffer;
}

static void expect_value(struct test *t, struct session *s, const char *path, const char *want) {
    int length;
    struct Stat stat;
    const char *got = get_data(t, s, path, MAX_PATH_CHARS, &length, &stat);
    expect_int(t, t_printf(t, "length of %s's value", path), length, value_length(want));
    if (want) expect_str(t, t_printf(t, "value of %s", path), got, want);
}

static struct Stat set_data(struct test *t, struct session *s, const char *path, const char *value,
                            int version) {
    struct Stat stat;
    int rc = zoo_set2(s->zh, path, value, value_length(value), version, &stat);
    expect_rc(t, t_printf(t, "set %s (version %d)", path, version), rc, ZOK);
    return stat;
}

static void add_digest_auth(struct test *t, struct session *s, const char *credentials) {
    struct completion *c = new_completion(t);
    int rc = zoo_add_auth(s->zh, "digest", credentials, (int)strlen(credentials), on_void_completion, c);
    expect_rc(t, "zoo_add_auth submitted", rc, ZOK);
    expect_rc(t, t_printf(t, "digest auth as %s", credentials), await_completion(t, c, "zoo_add_auth"), ZOK);
}

/* The host:port of a member other than the one under test, or NULL if ALL_MEMBERS names none. */
static const char *other_member(struct test *t) {
    if (!t->members) return NULL;
    char *list = (char *)t_printf(t, "%s", t->members);
    char *saved;
    for (char *host = strtok_r(list, ",", &saved); host; host = strtok_r(NULL, ",", &saved)) {
        if (strcmp(host, t->hosts) != 0) return host;
    }
    return NULL;
}

/* ================================================================================================
 * Tests. */

static void test_connect(struct test *t) {
    struct session *s = t->main;
    expect_int(t, "zoo_state", zoo_state(s->zh), ZOO_CONNECTED_STATE);
    if (session_id(s) == 0) fail(t, "session id: expected non-zero, got 0");
    expect_int(t, "zoo_recv_timeout (ms) granted for the one asked", zoo_recv_timeout(s->zh),
               SESSION_TIMEOUT_MS);
    struct session *second = connect_session(t, t->hosts);
    if (session_id(second) == session_id(s)) {
        fail(t, "second session id: expected one different from 0x%" PRIx64 ", got the same",
             session_id(s));
    }
}

/* tests/zk-server runs tickTime 2000, and a server grants between 2 and 20 ticks. */
static void test_session_timeout_clamped_to_server_bounds(struct test *t) {
    const int asked_ms[] = {1000, 100000};
    const int granted_ms[] = {4000, 40000};
    for (int i = 0; i < 2; i++) {
        struct session *s = start_session(t, t->hosts, (struct session_options){.timeout_ms = asked_ms[i]});
        expect_session_state(t, s, ZOO_CONNECTED_STATE, t_printf(t, "connecting with %d ms", asked_ms[i]));
        expect_int(t, t_printf(t, "zoo_recv_timeout (ms) granted for %d ms", asked_ms[i]),
                   zoo_recv_timeout(s->zh), granted_ms[i]);
        close_session(t, s);
    }
}

static void test_crud_round_trip(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "n");
    int64_t before_ms = (int64_t)time(NULL) * 1000;
    create_node(t, s, path, "v1");

    int length;
    struct Stat created;
    const char *value = get_data(t, s, path, MAX_PATH_CHARS, &length, &created);
    expect_int(t, "length of the created value", length, 2);
    expect_str(t, "created value", value, "v1");
    expect_int(t, "stat.version after create", created.version, 0);
    expect_int(t, "stat.dataLength after create", created.dataLength, 2);
    expect_int(t, "stat.mzxid after create (= czxid)", created.mzxid, created.czxid);
    expect_int(t, "stat.mtime after create (= ctime)", created.mtime, created.ctime);
    expect_int(t, "stat.ephemeralOwner of a persistent node", created.ephemeralOwner, 0);
    /* Server and test share one clock; a minute of slack covers any rounding. */
    if (created.ctime < before_ms - 60000 || created.ctime > before_ms + 60000) {
        fail(t, "stat.ctime: expected about %" PRId64 " (now, ms), got %" PRId64, before_ms, created.ctime);
    }

    struct Stat updated = set_data(t, s, path, "value-2", 0);
    expect_int(t, "stat.version after set", updated.version, 1);
    expect_int(t, "stat.dataLength after set", updated.dataLength, 7);
    expect_int(t, "stat.czxid after set", updated.czxid, created.czxid);
    expect_int(t, "stat.ctime after set", updated.ctime, created.ctime);
    if (updated.mzxid <= created.czxid) {
        fail(t, "stat.mzxid after set: expected > czxid 0x%" PRIx64 ", got 0x%" PRIx64, created.czxid,
             updated.mzxid);
    }
    if (updated.mtime < created.mtime) {
        fail(t, "stat.mtime after set: expected >= %" PRId64 ", got %" PRId64, created.mtime, updated.mtime);
    }
    expect_value(t, s, path, "value-2");
    struct Stat read_back = exists_stat(t, s, path);
    expect_same_stat(t, "exists after set vs set's stat", &read_back, &updated);

    expect_rc(t, "delete with the current version", zoo_delete(s->zh, path, 1), ZOK);
    char buffer[16];
    int buffer_length = sizeof buffer;
    expect_rc(t, "get after delete", zoo_get(s->zh, path, 0, buffer, &buffer_length, NULL), ZNONODE);
}

static void test_create2_returns_stat(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "n");
    char created[MAX_PATH_CHARS];
    struct Stat stat;
    int rc = zoo_create2(s->zh, path, "abc", 3, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, created,
                         sizeof created, &stat);
    expect_rc(t, "zoo_create2", rc, ZOK);
    expect_str(t, "zoo_create2 path", created, path);
    expect_int(t, "zoo_create2 stat.dataLength", stat.dataLength, 3);
    expect_int(t, "zoo_create2 stat.ephemeralOwner", stat.ephemeralOwner, session_id(s));
    struct Stat read_back = exists_stat(t, s, path);
    expect_same_stat(t, "exists vs zoo_create2's stat", &read_back, &stat);
}

static void test_create_and_read_errors(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "dup");
    create_node(t, s, path, "x");
    expect_rc(t, "duplicate create",
              zoo_create(s->zh, path, "y", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0), ZNODEEXISTS);
    expect_value(t, s, path, "x");

    const char *orphan = node(t, "missing/child");
    expect_rc(t, "create under a missing parent",
              zoo_create(s->zh, orphan, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0), ZNONODE);
    const char *missing = node(t, "missing");
    char buffer[16];
    int length = sizeof buffer;
    struct Stat stat;
    expect_rc(t, "get of a missing node", zoo_get(s->zh, missing, 0, buffer, &length, &stat), ZNONODE);
    expect_rc(t, "exists of a missing node", zoo_exists(s->zh, missing, 0, &stat), ZNONODE);
    expect_rc(t, "set of a missing node", zoo_set(s->zh, missing, "v", 1, -1), ZNONODE);
    expect_rc(t, "delete of a missing node", zoo_delete(s->zh, missing, -1), ZNONODE);

    const char *ephemeral = node(t, "ephemeral");
    create_as(t, s, ephemeral, "e", ZOO_EPHEMERAL);
    expect_rc(t, "create under an ephemeral",
              zoo_create(s->zh, t_printf(t, "%s/child", ephemeral), NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_PERSISTENT, NULL, 0),
              ZNOCHILDRENFOREPHEMERALS);
    /* The creator ACL stands for the session's authenticated ids; this session has none. */
    expect_rc(t, "create with ZOO_CREATOR_ALL_ACL and no auth",
              zoo_create(s->zh, node(t, "creator"), NULL, -1, &ZOO_CREATOR_ALL_ACL, ZOO_PERSISTENT, NULL, 0),
              ZINVALIDACL);
}

static void test_version_conflicts(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "n");
    create_node(t, s, path, "v0");
    expect_rc(t, "set with version 5 of a version-0 node", zoo_set(s->zh, path, "no", 2, 5), ZBADVERSION);
    expect_rc(t, "delete with version 5 of a version-0 node", zoo_delete(s->zh, path, 5), ZBADVERSION);
    expect_value(t, s, path, "v0");
    expect_int(t, "version after rejected writes", exists_stat(t, s, path).version, 0);

    set_data(t, s, path, "v1", 0);
    expect_rc(t, "set with the stale version 0", zoo_set(s->zh, path, "no", 2, 0), ZBADVERSION);
    expect_rc(t, "delete with the stale version 0", zoo_delete(s->zh, path, 0), ZBADVERSION);
    set_data(t, s, path, "v2", -1); /* -1 matches any version */
    expect_rc(t, "delete with the current version 2", zoo_delete(s->zh, path, 2), ZOK);
}

static void test_delete_parent_with_child_is_not_empty(struct test *t) {
    struct session *s = t->main;
    const char *parent = node(t, "parent");
    const char *child = node(t, "parent/child");
    create_node(t, s, parent, NULL);
    create_node(t, s, child, NULL);
    expect_rc(t, "delete of a parent with a child", zoo_delete(s->zh, parent, -1), ZNOTEMPTY);
    struct Stat stat = exists_stat(t, s, parent);
    expect_int(t, "parent stat.numChildren", stat.numChildren, 1);
    expect_int(t, "parent stat.cversion", stat.cversion, 1);
    expect_rc(t, "delete of the child", zoo_delete(s->zh, child, -1), ZOK);
    expect_rc(t, "delete of the emptied parent", zoo_delete(s->zh, parent, -1), ZOK);
}

/* The counter is the parent's child-create count, 10 digits, whatever the mode. */
static void test_sequential_names(struct test *t) {
    struct session *s = t->main;
    const char *prefix = node(t, "seq-");
    for (int i = 0; i < 3; i++) {
        const char *created = create_as(t, s, prefix, "s", ZOO_PERSISTENT_SEQUENTIAL);
        expect_str(t, t_printf(t, "sequential create #%d", i), created, t_printf(t, "%s%010d", prefix, i));
    }
    const char *lock = create_as(t, s, node(t, "lock-"), NULL, ZOO_EPHEMERAL_SEQUENTIAL);
    expect_str(t, "ephemeral sequential create after 3 others", lock, node(t, "lock-0000000003"));
    expect_int(t, "ephemeral sequential stat.ephemeralOwner", exists_stat(t, s, lock).ephemeralOwner,
               session_id(s));
    const char *plain = create_as(t, s, node(t, "plain"), NULL, ZOO_PERSISTENT);
    expect_str(t, "non-sequential create keeps its name", plain, node(t, "plain"));
    const char *after_plain = create_as(t, s, prefix, NULL, ZOO_PERSISTENT_SEQUENTIAL);
    expect_str(t, "sequential create after a plain one", after_plain, node(t, "seq-0000000005"));
}

static void test_ephemeral_gone_after_close(struct test *t) {
    struct session *owner = connect_session(t, t->hosts);
    struct session *observer = t->main;
    const char *ephemeral = node(t, "ephemeral");
    const char *persistent = node(t, "persistent");
    create_as(t, owner, ephemeral, "e", ZOO_EPHEMERAL);
    create_node(t, owner, persistent, "p");

    struct watch_log *log = new_watch_log(t);
    struct Stat stat = watch_exists(t, observer, ephemeral, log, ZOK);
    expect_int(t, "stat.ephemeralOwner seen by a second session", stat.ephemeralOwner, session_id(owner));

    close_session(t, owner);
    expect_event(t, log, ZOO_DELETED_EVENT, ephemeral);
    expect_no_node(t, observer, ephemeral);
    expect_value(t, observer, persistent, "p");
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "a,b,c": names joined with commas, in a string owned by the test. */
static const char *join_names(struct test *t, char *const *names, int count) {
    size_t size = 1;
    for (int i = 0; i < count; i++) size += strlen(names[i]) + 1;
    char *joined = t_alloc(t, size);
    for (int i = 0; i < count; i++) {
        if (i) strcat(joined, ",");
        strcat(joined, names[i]);
    }
    return joined;
}

/* Sorts `got` (the server's order is unspecified), frees it, and compares it with `want` ("a,b"). */
static void expect_children(struct test *t, struct String_vector *got, const char *want, const char *what) {
    qsort(got->data, (size_t)got->count, sizeof *got->data, compare_strings);
    const char *listed = join_names(t, got->data, got->count);
    deallocate_String_vector(got);
    expect_str(t, what, listed, want);
}

static void test_children(struct test *t) {
    struct session *s = t->main;
    const char *parent = node(t, "parent");
    create_node(t, s, parent, NULL);
    struct String_vector children;
    expect_rc(t, "children of an empty node", zoo_get_children(s->zh, parent, 0, &children), ZOK);
    expect_children(t, &children, "", "children of an empty node");

    const char *names[] = {"c", "a", "b"};
    for (int i = 0; i < 3; i++) create_node(t, s, t_printf(t, "%s/%s", parent, names[i]), NULL);
    expect_rc(t, "zoo_get_children", zoo_get_children(s->zh, parent, 0, &children), ZOK);
    expect_children(t, &children, "a,b,c", "zoo_get_children");

    struct Stat stat;
    expect_rc(t, "zoo_get_children2", zoo_get_children2(s->zh, parent, 0, &children, &stat), ZOK);
    expect_children(t, &children, "a,b,c", "zoo_get_children2");
    expect_int(t, "zoo_get_children2 stat.numChildren", stat.numChildren, 3);
    expect_int(t, "zoo_get_children2 stat.cversion", stat.cversion, 3);
    struct Stat last = exists_stat(t, s, t_printf(t, "%s/b", parent));
    expect_int(t, "zoo_get_children2 stat.pzxid (= the last child's czxid)", stat.pzxid, last.czxid);
    expect_rc(t, "children of a missing node", zoo_get_children(s->zh, node(t, "missing"), 0, &children),
              ZNONODE);
}

static void test_watch_exists_fires_on_create(struct test *t) {
    const char *path = node(t, "later");
    struct watch_log *log = new_watch_log(t);
    watch_exists(t, t->main, path, log, ZNONODE);
    struct session *writer = connect_session(t, t->hosts);
    create_node(t, writer, path, "x");
    expect_event(t, log, ZOO_CREATED_EVENT, path);
}

static void test_watch_get_fires_on_change_then_delete(struct test *t) {
    struct session *s = t->main;
    struct session *writer = connect_session(t, t->hosts);
    const char *path = node(t, "n");
    create_node(t, s, path, "v0");
    struct watch_log *log = new_watch_log(t);
    char buffer[16];
    int length = sizeof buffer;
    expect_rc(t, "zoo_wget", zoo_wget(s->zh, path, watch_logger, log, buffer, &length, NULL), ZOK);
    set_data(t, writer, path, "v1", -1);
    expect_event(t, log, ZOO_CHANGED_EVENT, path);

    length = sizeof buffer;
    expect_rc(t, "zoo_wget again", zoo_wget(s->zh, path, watch_logger, log, buffer, &length, NULL), ZOK);
    expect_int(t, "length read after the change", length, 2);
    expect_rc(t, "delete by the writer", zoo_delete(writer->zh, path, -1), ZOK);
    expect_event(t, log, ZOO_DELETED_EVENT, path);
}

static void test_watch_children_fires_on_child_changes(struct test *t) {
    struct session *s = t->main;
    struct session *writer = connect_session(t, t->hosts);
    const char *parent = node(t, "parent");
    const char *child = node(t, "parent/kid");
    create_node(t, s, parent, NULL);
    struct watch_log *log = new_watch_log(t);
    struct String_vector children;
    expect_rc(t, "zoo_wget_children", zoo_wget_children(s->zh, parent, watch_logger, log, &children), ZOK);
    deallocate_String_vector(&children);
    /* A data change of the parent is not a child change. */
    set_data(t, writer, parent, "data", -1);
    expect_no_more_events(t, s, log, "after a data change of the watched parent");
    create_node(t, writer, child, NULL);
    expect_event(t, log, ZOO_CHILD_EVENT, parent);

    struct Stat stat;
    expect_rc(t, "zoo_wget_children2", zoo_wget_children2(s->zh, parent, watch_logger, log, &children, &stat),
              ZOK);
    deallocate_String_vector(&children);
    expect_rc(t, "delete of the child", zoo_delete(writer->zh, child, -1), ZOK);
    expect_event(t, log, ZOO_CHILD_EVENT, parent);
}

static void test_watch_fires_once(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "n");
    create_node(t, s, path, "v0");
    struct watch_log *log = new_watch_log(t);
    watch_exists(t, s, path, log, ZOK);
    set_data(t, s, path, "v1", -1);
    expect_event(t, log, ZOO_CHANGED_EVENT, path);
    set_data(t, s, path, "v2", -1);
    expect_rc(t, "delete", zoo_delete(s->zh, path, -1), ZOK);
    expect_no_more_events(t, s, log, "after a second change and a delete without re-arming");
}

static void test_multi_commits_every_op(struct test *t) {
    struct session *s = t->main;
    const char *fresh = node(t, "new"), *updated = node(t, "set"), *checked = node(t, "check"),
               *doomed = node(t, "del");
    create_node(t, s, updated, "0");
    create_node(t, s, checked, "0");
    create_node(t, s, doomed, "0");
    struct watch_log *log = new_watch_log(t);
    watch_exists(t, s, updated, log, ZOK);
    watch_exists(t, s, doomed, log, ZOK);

    enum { OP_COUNT = 5 };
    zoo_op_t ops[OP_COUNT];
    zoo_op_result_t results[OP_COUNT];
    char created[MAX_PATH_CHARS], sequential[MAX_PATH_CHARS];
    struct Stat set_stat;
    zoo_create_op_init(&ops[0], fresh, "n", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, created, sizeof created);
    zoo_create_op_init(&ops[1], node(t, "seq-"), NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL,
                       sequential, sizeof sequential);
    zoo_set_op_init(&ops[2], updated, "1", 1, 0, &set_stat);
    zoo_check_op_init(&ops[3], checked, 0);
    zoo_delete_op_init(&ops[4], doomed, 0);
    expect_rc(t, "zoo_multi", zoo_multi(s->zh, OP_COUNT, ops, results), ZOK);
    for (int i = 0; i < OP_COUNT; i++) expect_rc(t, t_printf(t, "multi result #%d", i), results[i].err, ZOK);
    expect_str(t, "multi create result path", created, fresh);
    /* 3 creates before the multi and 1 before it in the multi */
    expect_str(t, "multi sequential create result path", sequential, node(t, "seq-0000000004"));
    expect_int(t, "multi set result stat.version", set_stat.version, 1);
    /* Notifications come in op order. */
    expect_event(t, log, ZOO_CHANGED_EVENT, updated);
    expect_event(t, log, ZOO_DELETED_EVENT, doomed);

    expect_value(t, s, fresh, "n");
    expect_value(t, s, updated, "1");
    expect_no_node(t, s, doomed);
    expect_int(t, "czxid of the multi's create (= the multi's set mzxid)", exists_stat(t, s, fresh).czxid,
               set_stat.mzxid);
}

/* A failing multi applies nothing: the ops before the failure report ZOK (rolled back), the failing
 * op its own code, the ops after it ZRUNTIMEINCONSISTENCY; zoo_multi returns the failing op's code. */
static void test_multi_failure_applies_nothing(struct test *t) {
    struct session *s = t->main;
    const char *fresh = node(t, "new"), *x = node(t, "x");
    create_node(t, s, x, "0");
    struct watch_log *log = new_watch_log(t);
    watch_exists(t, s, x, log, ZOK);

    zoo_op_t ops[4];
    zoo_op_result_t results[4];
    char created[MAX_PATH_CHARS];
    zoo_create_op_init(&ops[0], fresh, "n", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, created, sizeof created);
    zoo_set_op_init(&ops[1], x, "1", 1, -1, NULL);
    zoo_check_op_init(&ops[2], x, 5);
    zoo_set_op_init(&ops[3], x, "2", 1, -1, NULL);
    expect_rc(t, "zoo_multi with a wrong check version", zoo_multi(s->zh, 4, ops, results), ZBADVERSION);
    const int want[4] = {ZOK, ZOK, ZBADVERSION, ZRUNTIMEINCONSISTENCY};
    for (int i = 0; i < 4; i++) {
        expect_rc(t, t_printf(t, "failed multi result #%d", i), results[i].err, want[i]);
    }

    expect_no_node(t, s, fresh);
    expect_value(t, s, x, "0");
    expect_int(t, "version after the failed multi", exists_stat(t, s, x).version, 0);
    expect_no_more_events(t, s, log, "after a failed multi");
}

/* The writer uses another member when there is one, where sync matters: the reader's server may not
 * have applied the write yet when the writer's reply arrives. */
static void test_sync_makes_other_session_write_visible(struct test *t) {
    const char *other = other_member(t);
    struct session *writer = connect_session(t, other ? other : t->hosts);
    struct session *reader = t->main;
    const char *path = node(t, "n");
    create_node(t, writer, path, "v1");
    expect_str(t, "path in the sync completion", sync_path(t, reader, path)->value, path);
    expect_value(t, reader, path, "v1");
    set_data(t, writer, path, "v2", -1);
    sync_path(t, reader, path);
    expect_value(t, reader, path, "v2");
}

struct acl_entry {
    int perms;
    char scheme[64];
    char id[MAX_PATH_CHARS];
};

/* Reads the ACL, which the test expects to have exactly one entry. */
static struct acl_entry get_single_acl(struct test *t, struct session *s, const char *path,
                                       struct Stat *stat) {
    struct ACL_vector acl;
    expect_rc(t, t_printf(t, "zoo_get_acl %s", path), zoo_get_acl(s->zh, path, &acl, stat), ZOK);
    struct acl_entry entry = {0};
    int count = acl.count;
    if (count == 1) {
        entry.perms = acl.data[0].perms;
        snprintf(entry.scheme, sizeof entry.scheme, "%s", acl.data[0].id.scheme);
        snprintf(entry.id, sizeof entry.id, "%s", acl.data[0].id.id);
    }
    deallocate_ACL_vector(&acl);
    expect_int(t, t_printf(t, "ACL entries of %s", path), count, 1);
    return entry;
}

static void test_acl_digest_auth(struct test *t) {
    struct session *owner = t->main;
    const char *secret = node(t, "secret");
    add_digest_auth(t, owner, DIGEST_CREDENTIALS);
    expect_rc(t, "create with ZOO_CREATOR_ALL_ACL after digest auth",
              zoo_create(owner->zh, secret, "s3", 2, &ZOO_CREATOR_ALL_ACL, ZOO_PERSISTENT, NULL, 0), ZOK);
    struct Stat stat;
    struct acl_entry entry = get_single_acl(t, owner, secret, &stat);
    expect_int(t, "creator ACL perms", entry.perms, ZOO_PERM_ALL);
    expect_str(t, "creator ACL scheme", entry.scheme, "digest");
    expect_str(t, "creator ACL id", entry.id, DIGEST_ID);

    struct session *stranger = connect_session(t, t->hosts);
    char buffer[16];
    int length = sizeof buffer;
    expect_rc(t, "get without auth", zoo_get(stranger->zh, secret, 0, buffer, &length, NULL), ZNOAUTH);
    expect_rc(t, "set without auth", zoo_set(stranger->zh, secret, "x", 1, -1), ZNOAUTH);
    /* A wrong digest password is not an auth failure: it only adds an id that matches nothing. */
    add_digest_auth(t, stranger, "zkc-user:wrong");
    length = sizeof buffer;
    expect_rc(t, "get with the wrong password", zoo_get(stranger->zh, secret, 0, buffer, &length, NULL),
              ZNOAUTH);
    add_digest_auth(t, stranger, DIGEST_CREDENTIALS);
    expect_value(t, stranger, secret, "s3");
}

static void test_acl_get_set_versions(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "n");
    create_node(t, s, path, "v");
    struct Stat stat;
    struct acl_entry entry = get_single_acl(t, s, path, &stat);
    expect_int(t, "open ACL perms", entry.perms, ZOO_PERM_ALL);
    expect_str(t, "open ACL scheme", entry.scheme, "world");
    expect_str(t, "open ACL id", entry.id, "anyone");
    expect_int(t, "stat.aversion of a new node", stat.aversion, 0);

    /* ADMIN stays, so that the next zoo_set_acl is refused for its version, not for permission. */
    struct ACL read_admin = {ZOO_PERM_READ | ZOO_PERM_ADMIN, ZOO_ANYONE_ID_UNSAFE};
    struct ACL_vector read_admin_acl = {1, &read_admin};
    expect_rc(t, "zoo_set_acl (read+admin) with version 0", zoo_set_acl(s->zh, path, 0, &read_admin_acl),
              ZOK);
    expect_rc(t, "zoo_set_acl with the stale version 0", zoo_set_acl(s->zh, path, 0, &ZOO_OPEN_ACL_UNSAFE),
              ZBADVERSION);
    entry = get_single_acl(t, s, path, &stat);
    expect_int(t, "perms after zoo_set_acl", entry.perms, ZOO_PERM_READ | ZOO_PERM_ADMIN);
    expect_int(t, "stat.aversion after zoo_set_acl", stat.aversion, 1);
    expect_int(t, "stat.version after zoo_set_acl (data untouched)", stat.version, 0);
    expect_rc(t, "set of a read-only node", zoo_set(s->zh, path, "w", 1, -1), ZNOAUTH);
    expect_value(t, s, path, "v");
}

static void fill_pattern(char *buffer, int length, unsigned seed) {
    for (int i = 0; i < length; i++) buffer[i] = (char)((unsigned)i * 131u + seed);
}

static void expect_large_value(struct test *t, struct session *s, const char *path, const char *want) {
    int length;
    struct Stat stat;
    const char *got = get_data(t, s, path, LARGE_VALUE_BYTES + 16, &length, &stat);
    expect_int(t, "length of the large value read back", length, LARGE_VALUE_BYTES);
    expect_int(t, "stat.dataLength of the large value", stat.dataLength, LARGE_VALUE_BYTES);
    for (int i = 0; i < LARGE_VALUE_BYTES; i++) {
        if (got[i] != want[i]) fail(t, "large value differs first at byte %d", i);
    }
}

static void test_large_value(struct test *t) {
    struct session *s = t->main;
    const char *path = node(t, "big");
    char *value = t_alloc(t, LARGE_VALUE_BYTES);
    fill_pattern(value, LARGE_VALUE_BYTES, 7);
    int rc = zoo_create(s->zh, path, value, LARGE_VALUE_BYTES, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
    expect_rc(t, "create with a 512 KiB value", rc, ZOK);
    expect_large_value(t, s, path, value);
    fill_pattern(value, LARGE_VALUE_BYTES, 99);
    expect_rc(t, "set of a 512 KiB value", zoo_set(s->zh, path, value, LARGE_VALUE_BYTES, 0), ZOK);
    expect_large_value(t, s, path, value);
}

/* Null data (length -1) and empty data are different values; both have stat.dataLength 0. */
static void test_empty_and_null_values(struct test *t) {
    struct session *s = t->main;
    const char *empty = node(t, "empty"), *null = node(t, "null");
    create_node(t, s, empty, "");
    create_node(t, s, null, NULL);
    expect_value(t, s, empty, "");
    expect_value(t, s, null, NULL);
    expect_int(t, "stat.dataLength of empty data", exists_stat(t, s, empty).dataLength, 0);
    expect_int(t, "stat.dataLength of null data", exists_stat(t, s, null).dataLength, 0);
    set_data(t, s, empty, NULL, -1);
    expect_value(t, s, empty, NULL);
    set_data(t, s, null, "", -1);
    expect_value(t, s, null, "");
}

static void test_container_deleted_after_last_child(struct test *t) {
    struct session *s = t->main;
    const char *box = node(t, "box");
    expect_str(t, "container path", create_as(t, s, box, "c", ZOO_CONTAINER), box);
    expect_int(t, "container stat.ephemeralOwner", exists_stat(t, s, box).ephemeralOwner, 0);
    const char *item = t_printf(t, "%s/item", box);
    create_node(t, s, item, NULL);
    struct watch_log *log = new_watch_log(t);
    watch_exists(t, s, box, log, ZOK);
    expect_rc(t, "delete of the container's only child", zoo_delete(s->zh, item, -1), ZOK);
    expect_event_within(t, log, ZOO_DELETED_EVENT, box, REAPER_TIMEOUT_MS);
}

static void test_ttl_node_expires(struct test *t) {
    struct session *s = t->main;
    const char *prefix = node(t, "ttlseq-");
    const char *lasting = t_printf(t, "%s0000000000", prefix);
    char created[MAX_PATH_CHARS];
    int rc = zoo_create_ttl(s->zh, prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL,
                            3600 * 1000, created, sizeof created);
    expect_rc(t, "zoo_create_ttl (sequential, 1 h)", rc, ZOK);
    expect_str(t, "sequential TTL path", created, lasting);

    const char *path = node(t, "ttl");
    struct Stat stat;
    rc = zoo_create2_ttl(s->zh, path, "t", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_WITH_TTL, 500, created,
                         sizeof created, &stat);
    expect_rc(t, "zoo_create2_ttl (500 ms)", rc, ZOK);
    expect_str(t, "TTL path", created, path);
    expect_int(t, "TTL node stat.ephemeralOwner", stat.ephemeralOwner, 0);
    expect_int(t, "TTL node stat.dataLength", stat.dataLength, 1);
    /* On a slow machine the reaper may take the 500 ms node before the watch is set. */
    struct watch_log *log = new_watch_log(t);
    rc = zoo_wexists(s->zh, path, watch_logger, log, &stat);
    if (rc == ZOK) {
        expect_event_within(t, log, ZOO_DELETED_EVENT, path, REAPER_TIMEOUT_MS);
    } else {
        expect_rc(t, t_printf(t, "zoo_wexists %s", path), rc, ZNONODE);
    }
    exists_stat(t, s, lasting); /* its hour is not up */
}

/* Completions of one session's requests arrive in the order the requests were made. */
struct arrival_log {
    struct monitor monitor;
    int arrived;
    int child_count;
    char first_problem[MAX_PATH_CHARS * 2];
};

struct arrival_ticket {
    struct arrival_log *log;
    int index;
    char path[MAX_PATH_CHARS];
};

static void note_arrival(const struct arrival_ticket *ticket, int rc, const char *value) {
    struct arrival_log *log = ticket->log;
    pthread_mutex_lock(&log->monitor.lock);
    if (!log->first_problem[0]) {
        if (ticket->index != log->arrived) {
            snprintf(log->first_problem, sizeof log->first_problem,
                     "completion #%d was for request #%d", log->arrived, ticket->index);
        } else if (rc != ZOK) {
            snprintf(log->first_problem, sizeof log->first_problem, "request #%d: %s (%s)", ticket->index,
                     rc_name(rc), zerror(rc));
        } else if (value && strcmp(value, ticket->path) != 0) {
            snprintf(log->first_problem, sizeof log->first_problem, "request #%d created \"%s\", not \"%s\"",
                     ticket->index, value, ticket->path);
        }
    }
    log->arrived++;
    notify_and_unlock(&log->monitor);
}

static void on_create_arrival(int rc, const char *value, const void *data) {
    note_arrival(data, rc, value ? value : "(null)");
}

static void on_children_arrival(int rc, const struct String_vector *children, const void *data) {
    const struct arrival_ticket *ticket = data;
    if (rc == ZOK) ticket->log->child_count = children->count; /* read after every arrival */
    note_arrival(ticket, rc, NULL);
}

static bool all_arrived(const void *arg) {
    return ((const struct arrival_log *)arg)->arrived == ASYNC_BATCH_SIZE + 1;
}

static void test_async_creates_complete_in_order(struct test *t) {
    struct session *s = t->main;
    struct arrival_log *log = t_alloc(t, sizeof *log);
    monitor_init(&log->monitor);
    struct arrival_ticket *tickets = t_alloc(t, sizeof *tickets * (ASYNC_BATCH_SIZE + 1));
    for (int i = 0; i < ASYNC_BATCH_SIZE; i++) {
        tickets[i] = (struct arrival_ticket){log, i, ""};
        snprintf(tickets[i].path, sizeof tickets[i].path, "%s/n-%04d", t->root, i);
        int rc = zoo_acreate(s->zh, tickets[i].path, "a", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                             on_create_arrival, &tickets[i]);
        expect_rc(t, t_printf(t, "zoo_acreate #%d submitted", i), rc, ZOK);
    }
    tickets[ASYNC_BATCH_SIZE] = (struct arrival_ticket){log, ASYNC_BATCH_SIZE, ""};
    expect_rc(t, "zoo_aget_children submitted",
              zoo_aget_children(s->zh, t->root, 0, on_children_arrival, &tickets[ASYNC_BATCH_SIZE]), ZOK);
    if (!wait_until(&log->monitor, all_arrived, log, ASYNC_BATCH_TIMEOUT_MS)) {
        fail(t, "expected %d completions within %d ms, got %d", ASYNC_BATCH_SIZE + 1, ASYNC_BATCH_TIMEOUT_MS,
             log->arrived);
    }
    if (log->first_problem[0]) fail(t, "%s", log->first_problem);
    expect_int(t, "children listed after the creates", log->child_count, ASYNC_BATCH_SIZE);
}

static void test_chroot_maps_paths(struct test *t) {
    struct session *plain = t->main;
    struct session *rooted = connect_session(t, t_printf(t, "%s%s", t->hosts, t->root));
    expect_str(t, "create /a in the chroot", create_as(t, rooted, "/a", "x", ZOO_PERSISTENT), "/a");
    expect_value(t, plain, node(t, "a"), "x");

    struct String_vector children;
    expect_rc(t, "children of / in the chroot", zoo_get_children(rooted->zh, "/", 0, &children), ZOK);
    expect_children(t, &children, "a", "children of / in the chroot");

    struct watch_log *log = new_watch_log(t);
    watch_exists(t, rooted, "/b", log, ZNONODE);
    create_node(t, plain, node(t, "b"), NULL);
    expect_event(t, log, ZOO_CREATED_EVENT, "/b");
    const char *sequential = create_as(t, rooted, "/s-", NULL, ZOO_PERSISTENT_SEQUENTIAL);
    expect_str(t, "sequential create in the chroot (after /a and /b)", sequential, "/s-0000000002");
    expect_str(t, "sync in the chroot", sync_path(t, rooted, "/a")->value, "/a");
}

static void test_session_expired_after_close(struct test *t) {
    struct session *first = connect_session(t, t->hosts);
    clientid_t closed = *zoo_client_id(first->zh);
    close_session(t, first);
    struct session *again =
        start_session(t, t->hosts, (struct session_options){.resume = &closed, .log = CLIENT_LOG_DROPPED});
    expect_session_state(t, again, ZOO_EXPIRED_SESSION_STATE, "resuming a closed session");
}

static void test_session_moves_between_members(struct test *t) {
    const char *other = other_member(t);
    if (!other) skip(t, "needs a second ensemble member (ALL_MEMBERS, argv[2])");
    /* Its connection breaks once the moved session is closed. */
    struct session *first = start_session(t, t->hosts, (struct session_options){.log = CLIENT_LOG_DROPPED});
    expect_session_state(t, first, ZOO_CONNECTED_STATE, "connecting the first handle");
    const char *held = node(t, "held");
    create_as(t, first, held, "h", ZOO_EPHEMERAL);
    clientid_t id = *zoo_client_id(first->zh);

    struct session *moved = start_session(t, other, (struct session_options){.resume = &id});
    expect_session_state(t, moved, ZOO_CONNECTED_STATE, t_printf(t, "resuming the session on %s", other));
    expect_int(t, "session id after the move", session_id(moved), id.client_id);
    /* Each member may lag behind the other's writes until a sync. */
    sync_path(t, moved, held);
    expect_int(t, "ephemeralOwner seen on the new member", exists_stat(t, moved, held).ephemeralOwner,
               id.client_id);
    const char *added = node(t, "added");
    create_as(t, moved, added, "a", ZOO_EPHEMERAL);
    expect_int(t, "ephemeralOwner of a node created after the move",
               exists_stat(t, moved, added).ephemeralOwner, id.client_id);

    struct watch_log *log = new_watch_log(t);
    sync_path(t, t->main, added);
    watch_exists(t, t->main, added, log, ZOK);
    close_session(t, moved); /* closes the session, owned by the new member now */
    expect_event(t, log, ZOO_DELETED_EVENT, added);
    expect_no_node(t, t->main, held);
}

/* ================================================================================================
 * Runner. */

struct test_case {
    const char *name;
    void (*run)(struct test *);
};

static const struct test_case TESTS[] = {
    {"connect", test_connect},
    {"session_timeout_clamped_to_server_bounds", test_session_timeout_clamped_to_server_bounds},
    {"crud_round_trip", test_crud_round_trip},
    {"create2_returns_stat", test_create2_returns_stat},
    {"create_and_read_errors", test_create_and_read_errors},
    {"version_conflicts", test_version_conflicts},
    {"delete_parent_with_child_is_not_empty", test_delete_parent_with_child_is_not_empty},
    {"sequential_names", test_sequential_names},
    {"ephemeral_gone_after_close", test_ephemeral_gone_after_close},
    {"children", test_children},
    {"watch_exists_fires_on_create", test_watch_exists_fires_on_create},
    {"watch_get_fires_on_change_then_delete", test_watch_get_fires_on_change_then_delete},
    {"watch_children_fires_on_child_changes", test_watch_children_fires_on_child_changes},
    {"watch_fires_once", test_watch_fires_once},
    {"multi_commits_every_op", test_multi_commits_every_op},
    {"multi_failure_applies_nothing", test_multi_failure_applies_nothing},
    {"sync_makes_other_session_write_visible", test_sync_makes_other_session_write_visible},
    {"acl_digest_auth", test_acl_digest_auth},
    {"acl_get_set_versions", test_acl_get_set_versions},
    {"large_value", test_large_value},
    {"empty_and_null_values", test_empty_and_null_values},
    {"container_deleted_after_last_child", test_container_deleted_after_last_child},
    {"ttl_node_expires", test_ttl_node_expires},
    {"async_creates_complete_in_order", test_async_creates_complete_in_order},
    {"chroot_maps_paths", test_chroot_maps_paths},
    {"session_expired_after_close", test_session_expired_after_close},
    {"session_moves_between_members", test_session_moves_between_members},
};
enum { TEST_COUNT = sizeof TESTS / sizeof TESTS[0] };

static const char *volatile running_test = "(setup)";

/* Async-signal-safe: only write(2) and _exit. */
static void on_suite_timeout(int signo) {
    (void)signo;
    const char *parts[] = {"FAIL ", running_test, ": the suite did not finish in time (alarm)\n"};
    for (size_t i = 0; i < 3; i++) {
        ssize_t ignored = write(STDOUT_FILENO, parts[i], strlen(parts[i]));
        (void)ignored;
    }
    _exit(3);
}

/* Closes what the test left open (sessions first: their threads may still use the allocations). */
static void release_test(struct test *t) {
    for (int i = t->session_count - 1; i >= 0; i--) {
        if (t->sessions[i]->zh) zookeeper_close(t->sessions[i]->zh);
    }
    for (size_t i = 0; i < t->allocation_count; i++) free(t->allocations[i]);
    free(t->allocations);
}

/* Runs one test and prints its line; returns 0 passed, TEST_FAILED or TEST_SKIPPED. */
static int run_test(const struct test_case *tc, const char *hosts, const char *members) {
    struct test *t = calloc(1, sizeof *t);
    if (!t) {
        printf("FAIL %s: out of memory\n", tc->name);
        return TEST_FAILED;
    }
    t->hosts = hosts;
    t->members = members;
    snprintf(t->root, sizeof t->root, "/zkc-%d-%s", (int)getpid(), tc->name);
    running_test = tc->name;
    int outcome = setjmp(t->abort_test);
    if (outcome == 0) {
        t->main = connect_session(t, hosts);
        create_node(t, t->main, t->root, "");
        tc->run(t);
        printf("ok %s\n", tc->name);
    } else {
        printf("%s %s: %s\n", outcome == TEST_FAILED ? "FAIL" : "skip", tc->name, t->message);
    }
    fflush(stdout);
    release_test(t);
    free(t);
    return outcome;
}

static const struct test_case *find_test(const char *name) {
    for (int i = 0; i < TEST_COUNT; i++) {
        if (strcmp(TESTS[i].name, name) == 0) return &TESTS[i];
    }
    return NULL;
}

static void list_tests(FILE *out) {
    for (int i = 0; i < TEST_COUNT; i++) fprintf(out, "  %s\n", TESTS[i].name);
}

/* Marks the tests ZKC_SKIP names; exits on a name that is no test. */
static void read_skip_list(const char *list, bool skipped[TEST_COUNT]) {
    if (!list) return;
    char *copy = strdup(list);
    char *saved;
    for (char *name = strtok_r(copy, ", ", &saved); name; name = strtok_r(NULL, ", ", &saved)) {
        const struct test_case *tc = find_test(name);
        if (!tc) {
            fprintf(stderr, "zkc_e2e: ZKC_SKIP names \"%s\", which is no test; the tests are:\n", name);
            list_tests(stderr);
            exit(2);
        }
        skipped[tc - TESTS] = true;
    }
    free(copy);
}

/* A connect string this program can use: host:port with a numeric port, no chroot. */
static bool is_host_port(const char *hosts) {
    const char *colon = strrchr(hosts, ':');
    if (!colon || colon == hosts || colon[1] == '\0' || strchr(hosts, '/')) return false;
    for (const char *c = colon + 1; *c; c++) {
        if (*c < '0' || *c > '9') return false;
    }
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || !is_host_port(argv[1])) {
        fprintf(stderr,
                "usage: zkc_e2e HOST:PORT [ALL_MEMBERS]\n"
                "  HOST:PORT    the server under test, e.g. 127.0.0.1:2181 (no chroot)\n"
                "  ALL_MEMBERS  every ensemble member, e.g. 127.0.0.1:2181,127.0.0.1:2182\n"
                "  ZKC_SKIP     comma-separated tests to skip as known failures\n");
        return 2;
    }
    const char *members = argc == 3 ? argv[2] : NULL;
    bool skipped[TEST_COUNT] = {false};
    read_skip_list(getenv("ZKC_SKIP"), skipped);

    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zoo_set_log_stream(stderr);
    signal(SIGALRM, on_suite_timeout);
    alarm(SUITE_TIMEOUT_S);

    int64_t started_ms = monotonic_ms();
    int passed = 0, failed = 0, skipped_count = 0;
    for (int i = 0; i < TEST_COUNT; i++) {
        if (skipped[i]) {
            printf("skip %s: known failure, listed in ZKC_SKIP\n", TESTS[i].name);
            skipped_count++;
            continue;
        }
        int outcome = run_test(&TESTS[i], argv[1], members);
        passed += outcome == 0;
        failed += outcome == TEST_FAILED;
        skipped_count += outcome == TEST_SKIPPED;
        /* Without a connection no other test can pass: stop rather than time out in each. */
        if (outcome == TEST_FAILED && TESTS[i].run == test_connect) {
            printf("# %s failed, so the other %d tests were not run\n", TESTS[i].name, TEST_COUNT - i - 1);
            break;
        }
    }
    printf("# %d passed, %d failed, %d skipped in %.1f s\n", passed, failed, skipped_count,
           (double)(monotonic_ms() - started_ms) / 1000);
    return failed ? 1 : 0;
}
