"""`zoolog shell` as a person uses it: typed into a real terminal (tmux), with Tab completion,
the Up arrow and watch events arriving while a line is being typed; and in its non-interactive
forms (-c, trailing words, a script on stdin) with exact output and exit statuses.

The server is zoolog, or Apache ZooKeeper with ZK_KIND=apache; the shell is always zoolog's."""
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
ZOOLOG = os.environ.get("ZOOLOG_BIN", str(ROOT / "target" / "release" / "zoolog"))
SCREEN_TIMEOUT_S = 15.0

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def shell(server, *args, stdin=None):
    """Runs `zoolog shell` to completion; returns (exit status, stdout, stderr)."""
    done = subprocess.run(
        [ZOOLOG, "shell", "-server", server.hosts, *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


class Terminal:
    """One `zoolog shell` in a tmux pane of its own tmux server, read as a person reads it."""

    def __init__(self, home):
        self.home = home
        self.socket = f"zoolog-shell-test-{uuid.uuid4().hex[:12]}"

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.socket, *args],
                              capture_output=True, text=True, timeout=10)

    def start(self, hosts):
        # The pane outlives the shell so that what it printed last can still be read.
        command = f"env HOME={self.home} {ZOOLOG} shell -server {hosts}; echo '[shell exited]'; sleep 600"
        started = self.tmux("new-session", "-d", "-s", "shell", "-x", "160", "-y", "50", command)
        assert started.returncode == 0, started.stderr
        return self

    def type(self, text):
        self.tmux("send-keys", "-t", "shell", "-l", text)

    def press(self, *keys):
        self.tmux("send-keys", "-t", "shell", *keys)

    def run(self, command, settle=True):
        """Types a command and Enter, then (with `settle`) waits for the next prompt, as a person
        does: keys typed while a command runs may be lost, as in other line editors."""
        number = self.last_prompt_number()
        self.type(command)
        self.press("Enter")
        if settle:
            self.wait_for(rf"^\[zk: \S+\(\w+\) {number + 1}\] $")

    def last_prompt_number(self):
        numbers = re.findall(r"^\[zk: \S+\(\w+\) (\d+)\] ", self.screen(), re.MULTILINE)
        assert numbers, f"no prompt on the screen:\n{self.screen()}"
        return int(numbers[-1])

    def screen(self):
        return self.tmux("capture-pane", "-p", "-J", "-t", "shell", "-S", "-1000").stdout

    def wait_for(self, pattern, after=0):
        """Waits until `pattern` (a regex) shows at or after screen offset `after`; returns the
        match. Fails with the screen when it does not show within the deadline."""
        deadline = time.monotonic() + SCREEN_TIMEOUT_S
        while True:
            screen = self.screen()
            found = re.compile(pattern, re.MULTILINE).search(screen, after)
            if found:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"{pattern!r} did not appear; the screen:\n{screen}")
            time.sleep(0.05)

    def prompt_line(self):
        """The last non-blank line: the prompt and what is being typed after it."""
        return [line for line in self.screen().splitlines() if line.strip()][-1]

    def close(self):
        self.tmux("kill-server")


@pytest.fixture
def terminal_factory(tmp_path):
    terminals = []

    def make(server, home=None):
        home = home or tmp_path / "home"
        home.mkdir(exist_ok=True)
        terminal = Terminal(home).start(server.hosts)
        terminals.append(terminal)
        return terminal

    yield make
    for terminal in terminals:
        terminal.close()


def prompt(server, count):
    return re.escape(f"[zk: {server.hosts}(CONNECTED) {count}] ")


def test_commands_typed_at_the_prompt_print_what_zkcli_prints(server, terminal_factory):
    term = terminal_factory(server)
    term.wait_for(r"WatchedEvent state:SyncConnected type:None path:null zxid: -1")
    term.wait_for(prompt(server, 0) + "$")

    term.run("create /typed hello")
    term.wait_for(r"^Created /typed$")
    term.run("get -s /typed")
    stat = term.wait_for(r"^hello\ncZxid = 0x[0-9a-f]+\nctime = \w{3} \w{3} \d\d \d\d:\d\d:\d\d \S+ \d{4}\n"
                         r"mZxid = 0x[0-9a-f]+\nmtime = .*\npZxid = 0x[0-9a-f]+\ncversion = 0\n"
                         r"dataVersion = 0\naclVersion = 0\nephemeralOwner = 0x0\ndataLength = 5\n"
                         r"numChildren = 0\n")
    term.run("set /typed v2")
    term.run("get /nope")
    term.wait_for(r"^Node does not exist: /nope$", stat.end())
    term.run("create /typed again")
    term.wait_for(r"^Node already exists: /typed$")
    term.run("set -v 9 /typed x")
    term.wait_for(r"^version No is not valid : /typed$")
    term.run("ls /")
    term.wait_for(r"^\[.*typed.*zookeeper\]$")
    term.wait_for(prompt(server, 7) + "$")


def test_a_watch_event_prints_above_the_line_being_typed(server, terminal_factory):
    term = terminal_factory(server)
    term.wait_for(prompt(server, 0))
    term.run("create /watched v1")
    term.run("get -w /watched")
    term.wait_for(r"^v1$")
    term.wait_for(prompt(server, 2) + "$")
    term.type("ls /wat")
    term.wait_for(prompt(server, 2) + re.escape("ls /wat") + "$")

    assert shell(server, "-c", "set /watched v2")[0] == 0

    event = term.wait_for(r"^WATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged "
                          r"path:/watched zxid: -?\d+$")
    # The half-typed line is redrawn whole below the event, and still editable.
    term.wait_for(prompt(server, 2) + re.escape("ls /wat") + "$", event.end())
    term.press("Tab")
    term.wait_for(prompt(server, 2) + re.escape("ls /watched") + "$", event.end())
    term.press("Enter")
    term.wait_for(r"^\[\]$", event.end())
    # One notification, one print, however many watches it fired.
    assert term.screen().count("type:NodeDataChanged") == 1


def test_tab_completes_commands_and_child_names(server, terminal_factory):
    term = terminal_factory(server)
    term.wait_for(prompt(server, 0))
    term.run("create /parent")
    term.run("create /parent/child-one 1")
    term.run("create /parent/other 2")
    term.wait_for(prompt(server, 3) + "$")

    term.type("getE")
    term.press("Tab")
    term.wait_for(prompt(server, 3) + re.escape("getEphemerals ") + "$")
    term.press("C-u")
    term.type("get /parent/ch")
    term.press("Tab")
    term.wait_for(prompt(server, 3) + re.escape("get /parent/child-one") + "$")
    term.press("Enter")
    term.wait_for(r"^1$")
    term.wait_for(prompt(server, 4) + "$")


def test_up_arrow_recalls_history_across_sessions(server, terminal_factory, tmp_path):
    home = tmp_path / "home"
    term = terminal_factory(server, home)
    term.wait_for(prompt(server, 0))
    term.run("create /remembered yes")
    term.run("getAllChildrenNumber /remembered")
    term.wait_for(r"^0$")
    term.run("history")
    term.wait_for(r"^0 - create /remembered yes\n1 - getAllChildrenNumber /remembered\n2 - history$")
    term.press("Up")
    term.press("Up")
    term.wait_for(prompt(server, 3) + re.escape("getAllChildrenNumber /remembered") + "$")
    term.press("C-u")
    term.run("quit", settle=False)
    term.wait_for(r"^\[shell exited\]$")

    history = (home / ".zoolog_history").read_text()
    assert "create /remembered yes" in history

    again = terminal_factory(server, home)
    again.wait_for(prompt(server, 0) + "$")
    again.press("Up")
    again.wait_for(prompt(server, 0) + re.escape("quit") + "$")
    again.press("Up")
    again.wait_for(prompt(server, 0) + re.escape("history") + "$")


def test_close_and_connect_print_session_events(server, terminal_factory):
    term = terminal_factory(server)
    term.wait_for(prompt(server, 0))
    term.run("create -e /mine x")
    term.run("getEphemerals")
    term.wait_for(r"^\[/mine\]$")
    term.run("close")
    term.wait_for(r"WatchedEvent state:Closed type:None path:null zxid: -1")
    term.wait_for(re.escape(f"[zk: {server.hosts}(CLOSED) 3] ") + "$")
    term.run("ls /")
    term.wait_for(r"^Not connected$")
    term.run(f"connect {server.hosts}")
    term.wait_for(prompt(server, 5) + "$")
    term.run("stat /mine")
    term.wait_for(r"^Node does not exist: /mine$")


def test_losing_and_regaining_the_server_prints_session_events(server, terminal_factory):
    term = terminal_factory(server)
    term.wait_for(prompt(server, 0) + "$")
    server.stop()
    lost = term.wait_for(r"^WatchedEvent state:Disconnected type:None path:null zxid: -1$")
    server.restart()
    term.wait_for(r"^WatchedEvent state:SyncConnected type:None path:null zxid: -1$", lost.end())
    # The session survived the restart: it works with no reconnect by hand.
    term.run("ls /zookeeper")
    term.wait_for(r"^\[config, quota\]$", lost.end())


def test_one_command_with_c_or_trailing_words(server):
    assert shell(server, "-c", "create /one x") == (0, "Created /one\n", "")
    assert shell(server, "get", "/one") == (0, "x\n", "")
    assert shell(server, "-c", 'set /one "two words"') == (0, "", "")
    assert shell(server, "-c", "get /one") == (0, "two words\n", "")
    assert shell(server, "-c", "get /nope") == (1, "", "Node does not exist: /nope\n")
    # As in zkCli, a node created without data holds null data, which `get` prints as null,
    # unlike a node created with empty data.
    assert shell(server, "-c", "create /bare") == (0, "Created /bare\n", "")
    assert shell(server, "-c", "get /bare") == (0, "null\n", "")
    assert shell(server, "-c", 'create /blank ""') == (0, "Created /blank\n", "")
    assert shell(server, "-c", "get /blank") == (0, "\n", "")
    assert shell(server, "-c", "ls") == (1, "", "ls [-s] [-w] [-R] path\n")
    status, out, err = shell(server, "-c", "bogus")
    assert (status, out) == (127, "")
    assert err.endswith("Command not found: Command not found bogus\n")
    assert "\tls [-s] [-w] [-R] path\n" in err


def test_a_script_on_stdin(server):
    script = """\
# set up
create /script
create /script/a 1
create -s /script/seq- s

ls /script
create /script/a again
getAcl /script/a
setAcl /script/a world:anyone:r
set /script/a 2
getAllChildrenNumber /script
deleteall /script
ls /script
"""
    status, out, err = shell(server, stdin=script)
    assert out == (
        "Created /script\n"
        "Created /script/a\n"
        "Created /script/seq-0000000001\n"
        "[a, seq-0000000001]\n"
        "'world,'anyone\n: cdrwa\n"
        "2\n"
    )
    assert err == (
        "Node already exists: /script/a\n"
        "Insufficient permission : /script/a\n"
        "Node does not exist: /script\n"
    )
    # The last failure decides the status, even when later commands succeed.
    assert status == 1
    assert shell(server, stdin="ls /zookeeper\nsync /\n") == (0, "[config, quota]\nSync is OK\n", "")


def test_quotas_set_listed_enforced_and_deleted(server_factory):
    server = server_factory("-Dzookeeper.enforceQuota=true")
    script = """\
create /q
create /q/a 12345
setquota -n 5 /q
setquota -N 3 /q
listquota /q
create /q/b
create /q/c
setquota -n 1 /q
setquota -n 2 -b 3 /q
setquota -n 0 /q
setquota -n 2 /q/a
setquota -n 2 /nope
delquota -n /q
listquota /q
delquota /q
listquota /q
delquota /q
ls /zookeeper/quota
"""
    status, out, err = shell(server, stdin=script)
    assert out == (
        "Created /q\n"
        "Created /q/a\n"
        "Output quota for /q count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=3\n"
        "Output stat for /q count=2,bytes=5\n"
        "Created /q/b\n"
        "[Warning]: the count quota you create is less than the existing count:3\n"
        "Output quota for /q count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3\n"
        "Output stat for /q count=3,bytes=5\n"
        "Quota does not exist for /q\n"
        "[]\n"
    )
    assert err == (
        "absolute path is /zookeeper/quota/q/zookeeper_limits\n"
        # /q, /q/a and /q/b make three: the hard limit.
        "Quota has exceeded : /q/c\n"
        "The option 'b' was specified but an option from this group has already been selected: 'n'\n"
        "the num quota must be greater than zero\n"
        "/q/a has a parent /q which has a quota\n"
        "/nope does not exist.\n"
        "absolute path is /zookeeper/quota/q/zookeeper_limits\n"
        "absolute path is /zookeeper/quota/q/zookeeper_limits\n"
        "quota for /q does not exist.\n"
    )
    assert status == 1


def test_reconfig_prints_the_servers_refusal_and_version_names_the_protocol(server):
    # Standalone servers (zoolog's and ZooKeeper's) have reconfiguration disabled.
    assert shell(server, "-c", "reconfig -add server.5=127.0.0.1:2888:3888;2181") == (
        1, "", "KeeperErrorCode = Reconfig is disabled\n")
    assert shell(server, "-c", "reconfig -members a -remove 3") == (
        1, "", "Can't use -file or -members together with -add or -remove (mixing incremental "
               "and non-incremental modes is not allowed)\n")
    status, out, err = shell(server, "-c", "version")
    assert (status, err) == (0, "")
    assert re.fullmatch(r"ZooKeeper CLI version: 3\.9\.\d+-zoolog-\S+\n", out), out
