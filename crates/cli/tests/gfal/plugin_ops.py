"""Drives the longhaul gfal2 plugin through Debian's python3-gfal2, as FTS3's copy agent
drives gfal2: transfer parameters with overwrite, parent creation, streams, a timeout and
an ADLER32 checksum check on both ends; then the namespace calls Rucio makes (stat,
listdir, mkdir_rec, checksum, unlink, rmdir). Run by crates/cli/tests/gfal_plugin.rs:

    plugin_ops.py longhaul://HOST:PORT_A longhaul://HOST:PORT_B LOCAL_DIR

LOCAL_DIR holds up.bin. Leaves, for the Rust test to compare byte for byte:
A/in/up.bin (uploaded), LOCAL_DIR/down/up.bin (downloaded), B/tp/copy.bin (third-party).
Prints one JSON object and exits 0 when every check held; an assertion's traceback and
exit 1 otherwise.
"""

import errno
import json
import stat
import sys

import gfal2

A, B, LOCAL = sys.argv[1], sys.argv[2], sys.argv[3]
SRC = "file://" + LOCAL + "/up.bin"

ctx = gfal2.creat_context()
plugins = ctx.get_plugin_names()
# Without the plugin every longhaul:// call would fail with "Protocol not supported".
assert any(p.startswith("longhaul") for p in plugins), plugins
assert any(p.startswith("file") for p in plugins), plugins

events = []
progress = []


def on_event(e):
    events.append((e.stage, e.description))


def on_monitor(src, dst, average, instant, transferred, elapsed):
    progress.append(transferred)


def params(overwrite=False, checksum=("ADLER32", "")):
    """Transfer parameters as FTS3 sets them for a job with checksum verification."""
    p = ctx.transfer_parameters()
    p.overwrite = overwrite
    p.create_parent = True
    p.nbstreams = 2
    p.timeout = 600
    p.event_callback = on_event
    p.monitor_callback = on_monitor
    if checksum is not None:
        algorithm, value = checksum
        p.set_checksum(gfal2.checksum_mode.both, algorithm, value)
    return p


def fails_with(code, call, *args):
    """Runs call(*args); it must raise a GError with errno `code`. Returns its message."""
    try:
        call(*args)
    except gfal2.GError as e:
        assert e.code == code, (call, args, e.code, errno.errorcode.get(e.code), e.message)
        return e.message
    raise AssertionError("%s%r succeeded; expected %s" % (call, args, errno.errorcode[code]))


size = ctx.stat(SRC).st_size
local_sum = ctx.checksum(SRC, "ADLER32")

# Upload, into a directory that does not exist yet, checksums compared by the plugin.
up = A + "/in/up.bin"
ctx.filecopy(params(), SRC, up)
st = ctx.stat(up)
assert stat.S_ISREG(st.st_mode) and st.st_size == size, (st.st_mode, st.st_size, size)
assert ctx.lstat(up).st_size == size
assert ctx.checksum(up, "ADLER32") == local_sum, (ctx.checksum(up, "ADLER32"), local_sum)
assert ctx.checksum(up, "adler32") == local_sum
assert len(local_sum) == 8 and local_sum == local_sum.lower(), local_sum
blake = ctx.checksum(up, "BLAKE3")
assert len(blake) == 64 and all(c in "0123456789abcdef" for c in blake), blake
assert ctx.checksum(up, "blake3") == blake
fails_with(errno.ENOSYS, ctx.checksum, up, "MD5")
assert ("TRANSFER:ENTER" in [s for s, _ in events]), events
assert progress and progress[-1] == size, progress

# The destination exists: refused without overwrite, replaced with it.
msg = fails_with(errno.EEXIST, ctx.filecopy, params(), SRC, up)
assert "exists" in msg, msg
ctx.filecopy(params(overwrite=True), SRC, up)
# A user-given checksum (FTS3's job checksum): the right one passes, a wrong one fails.
ctx.filecopy(params(overwrite=True, checksum=("adler32", local_sum)), SRC, up)
msg = fails_with(errno.EIO, ctx.filecopy, params(overwrite=True, checksum=("ADLER32", "deadbeef")), SRC, up)
assert "MISMATCH" in msg.upper(), msg

# Download.
down = "file://" + LOCAL + "/down/up.bin"
ctx.filecopy(params(), up, down)
assert ctx.checksum(down, "ADLER32") == local_sum

# Third-party copy: B pulls from A.
tp = B + "/tp/copy.bin"
ctx.filecopy(params(), up, tp)
assert ctx.stat(tp).st_size == size
assert ctx.checksum(tp, "ADLER32") == local_sum
assert "3rd pull" in [d for s, d in events if s == "TRANSFER:TYPE"], events

# A source that is not there.
fails_with(errno.ENOENT, ctx.filecopy, params(), A + "/no/such/file", "file://" + LOCAL + "/x")

# Namespace.
fails_with(errno.ENOENT, ctx.stat, A + "/no-such-entry")
ctx.mkdir_rec(A + "/made/deep/er", 0o755)
assert stat.S_ISDIR(ctx.stat(A + "/made/deep/er").st_mode)
ctx.mkdir_rec(A + "/made/deep/er", 0o755)  # already there: no error
fails_with(errno.EEXIST, ctx.mkdir, A + "/made", 0o755)
ctx.mkdir(A + "/made/one", 0o700)
names = sorted(ctx.listdir(A + "/made"))
assert names == ["deep", "one"], names
assert sorted(ctx.listdir(A + "/")) == ["in", "made"], ctx.listdir(A + "/")
assert sorted(ctx.listdir(A + "/in")) == ["up.bin"], ctx.listdir(A + "/in")
fails_with(errno.ENOTEMPTY, ctx.rmdir, A + "/made/deep")
fails_with(errno.ENOTDIR, ctx.listdir, up)
ctx.rmdir(A + "/made/deep/er")
ctx.rmdir(A + "/made/deep")
ctx.rmdir(A + "/made/one")
fails_with(errno.ENOENT, ctx.stat, A + "/made/deep")

victim = A + "/made/victim.bin"
ctx.filecopy(params(), SRC, victim)
fails_with(errno.EISDIR, ctx.unlink, A + "/made")
ctx.unlink(victim)
fails_with(errno.ENOENT, ctx.stat, victim)
fails_with(errno.ENOENT, ctx.unlink, victim)
ctx.rmdir(A + "/made")

print(json.dumps({
    "plugins": plugins,
    "size": size,
    "adler32": local_sum,
    "blake3": blake,
    "monitor_reports": len(progress),
    "events": len(events),
}))
