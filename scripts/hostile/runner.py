"""Runs one case in its own directory and judges it (the verdicts are listed in
scripts/hostile_catalogue.py's docstring)."""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time

from .common import NANINF, SAN, TIMEOUT, DGX, DGX2, SD2, TINY, ATLAS, cfg

SHARED_INPUTS = (TINY, DGX, SD2, ATLAS, DGX2)


def snapshot(d):
    """Every entry under d: a regular file by its hash, a link by its target, a directory."""
    res = {}
    for root, dirs, files in os.walk(d.encode()):
        for fn in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = os.path.join(root, fn)
            res[os.path.relpath(p, d.encode())] = entry(p)
        for x in dirs:
            p = os.path.join(root, x)
            if not os.path.islink(p):
                res[os.path.relpath(p, d.encode()) + b'/'] = ('d',)
    return res


def entry(p):
    try:
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            if st.st_size > (256 << 20):
                return ('big', st.st_size, st.st_mtime_ns)
            with open(p, 'rb') as f:
                return ('f', hashlib.sha256(f.read()).hexdigest())
        if stat.S_ISLNK(st.st_mode):
            return ('l', os.readlink(p))
        return ('o', st.st_mode)
    except OSError as e:
        return ('err', str(e))


def null_numbers(doc, path='$'):
    """nulls under keys that name a quantity (units in the key), outside options."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = path + '.' + k
            if v is None and re.search(r'(_s|_bytes|_per_s|_ratio|_scale|^pp|^dp|bytes_per_sample)$', k) \
                    and not p.startswith('$.options') and p not in ('$.solver.activation_budget_bytes',):
                out.append(p)
            out += null_numbers(v, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += null_numbers(v, '%s[%d]' % (path, i))
    return out


def scan_text(name, data, problems, skip_naninf=False):
    if not skip_naninf:
        m = NANINF.search(data)
        if m:
            ctx = data[max(0, m.start() - 60):m.end() + 40]
            problems.append('non-finite token %r in %s: ...%s...' % (m.group(0).decode(), name,
                                                                    ctx.decode(errors='replace')))
    s = data.lstrip()
    if s[:1] in (b'{', b'['):
        try:
            doc = json.loads(data)
        except Exception as e:
            if name.endswith('.json') and len(data) < (64 << 20):
                problems.append('%s is not valid JSON: %s' % (name, e))
            return
        nn = null_numbers(doc)
        if nn:
            problems.append('null where a number is expected in %s: %s' % (name, ', '.join(nn[:5])))


# ---------------------------------------------------------------- one case
def fresh_dir(i, c):
    name = '%03d-%s' % (i, re.sub(r'[^A-Za-z0-9_.=+-]', '_', c['name']))
    d = os.path.join(cfg.cases, name)
    if os.path.exists(d):
        for root, dirs, files in os.walk(d):
            for x in dirs:
                try:
                    os.chmod(os.path.join(root, x), 0o755)
                except OSError:
                    pass
        shutil.rmtree(d)
    os.makedirs(d)
    return name, d


def write_cmd(d, cmd):
    shown = [x.decode('latin1') if isinstance(x, bytes) else x for x in cmd]
    with open(d + '/cmd.txt', 'w') as f:
        f.write('cd %s && %s\n' % (d, ' '.join(repr(a) if (not a or re.search(r'[\s\'"\\]', a))
                                                else a for a in shown)))


def execute(c, cmd, d):
    """Runs the command: plainly, or through the case's own `run` (signals, pipes, limits)."""
    if c['run']:
        return c['run'](cmd, d, c)
    return subprocess.run(cmd, cwd=d, capture_output=True,
                          input=c['stdin'] if c['stdin'] is not None else b'')


def judge_exit(c, rc, err, fails):
    san = SAN.search(err)
    if san:
        fails.append('sanitizer report: ' + err[max(0, san.start() - 100):san.start() + 1500])
    if rc == 3 and 3 not in c['expect']:
        fails.append('exit 3 (internal error): ' + err[-600:])
    if rc == 124 and c['timeout'] >= TIMEOUT:
        fails.append('timed out after %ds' % c['timeout'])
    elif rc == 124:
        fails.append('timed out after %ds (case limit)' % c['timeout'])
    elif (rc < 0 or rc >= 128) and rc not in c['expect']:
        fails.append('killed by signal / abort (rc %d): %s' % (rc, err[-800:]))
    if rc not in (0, 1, 2, 3, 4, 124) and rc < 128 and rc >= 0:
        fails.append('undocumented exit code %d' % rc)


def judge_files(c, rc, before, after, fails, quest):
    outputs = set(o.encode() if isinstance(o, str) else o for o in c['outputs'])
    new = sorted(set(after) - set(before))
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    gone = sorted(set(before) - set(after))
    names = lambda keys: [x.decode(errors='replace') for x in keys]  # noqa: E731
    if rc != 0:
        check_run = rc == 1 and c['name'].startswith('w-sim-check')
        if new and not (rc == 4 and set(new) <= outputs) and not (check_run and set(new) <= outputs):
            fails.append('files created despite exit %d: %s' % (rc, names(new)))
        if changed and not (rc == 4 and set(changed) <= outputs):
            fails.append('files changed despite exit %d: %s' % (rc, names(changed)))
        if gone:
            fails.append('files removed despite exit %d: %s' % (rc, names(gone)))
        if check_run and new:
            quest.append('simulate --check exit 1 wrote its report (%s)' % names(new))
    else:
        bad_change = [k for k in changed if k not in outputs]
        if bad_change:
            fails.append('input/unrelated file modified on success: %s' % names(bad_change))
        if gone:
            fails.append('files removed: %s' % names(gone))
        stray = [k for k in new if k not in outputs]
        if stray:
            quest.append('unexpected new files on success: %s' % names(stray))
    return new, changed


def judge_outputs(c, d, r, written, shared_before, fails):
    for p, h in shared_before.items():
        if hashlib.sha256(open(p, 'rb').read()).hexdigest() != h:
            fails.append('shared profile modified: ' + p)
    skip = c['name'].startswith('m-name-unicode')
    for k in written:
        p = os.path.join(d.encode(), k)
        if os.path.isfile(p) and os.path.getsize(p) < (256 << 20):
            scan_text(k.decode(errors='replace'), open(p, 'rb').read(), fails, skip_naninf=skip)
    scan_text('stdout', r.stdout, fails, skip_naninf=skip)


DEV_LINKS = {'/dev/stdin': '/proc/self/fd/0', '/dev/stdout': '/proc/self/fd/1',
             '/dev/stderr': '/proc/self/fd/2'}


def judge_dev_links(fails):
    """A binary that renames over /dev/stdout (as root) breaks every later run on the machine:
    the case fails, and the link is put back at once."""
    for dev, target in DEV_LINKS.items():
        if os.path.lexists(dev) and not os.path.islink(dev):
            fails.append('%s was replaced by a regular file (restored as a link to %s)'
                         % (dev, target))
            try:
                os.unlink(dev)
                os.symlink(target, dev)
            except OSError as e:
                fails.append('cannot restore %s: %s' % (dev, e))


def judge_expectations(c, rc, err, out, fails, quest):
    if rc in (0, 1, 2, 4) and rc not in c['expect']:
        if rc == 0:
            fails.append('UNEXPECTED SUCCESS (expected %s)' % (c['expect'],))
        else:
            quest.append('exit %d, expected %s' % (rc, c['expect']))
    if rc in (1, 2, 3):
        text = err + ('\n' + out if c['args'] and c['args'][0] == 'validate' else '')
        if not text.strip():
            fails.append('exit %d with no message' % rc)
        elif c['msg'] and not re.search(c['msg'], text):
            quest.append('message does not match /%s/: %s' % (c['msg'], text.strip()[:400]))


def run_case(i, c, binpath, timing=False):
    name, d = fresh_dir(i, c)
    if c['setup']:
        c['setup'](d)
    args = [a.replace('{d}', d) if isinstance(a, str) else a for a in c['args']]
    cmd = ['nice', '-n', '10', 'timeout', str(c['timeout']), binpath] + args
    write_cmd(d, cmd)
    before = snapshot(d)
    shared_before = {p: hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in SHARED_INPUTS}
    t0 = time.time()
    r = execute(c, cmd, d)
    el = time.time() - t0
    rc = r.returncode
    # kept beside the case (not inside the snapshot: written after it)
    after = snapshot(d)
    with open(d + '/stdout.txt', 'wb') as f:
        f.write(r.stdout[:4 << 20])
    with open(d + '/stderr.txt', 'wb') as f:
        f.write(r.stderr[:4 << 20])
    err, out = r.stderr.decode(errors='replace'), r.stdout.decode(errors='replace')
    fails, quest = [], []
    judge_exit(c, rc, err, fails)
    new, changed = judge_files(c, rc, before, after, fails, quest)
    judge_outputs(c, d, r, set(new) | set(changed), shared_before, fails)
    judge_expectations(c, rc, err, out, fails, quest)
    judge_dev_links(fails)
    if c['post']:
        c['post'](d, r, fails, quest)
    res = dict(name=name, cls=c['cls'], rc=rc, seconds=round(el, 2), expect=c['expect'],
               fails=fails, questionable=quest, note=c['note'], stderr_head=err[:1500],
               cmd=open(d + '/cmd.txt').read().strip())
    if timing or (el > 30 and binpath == cfg.bin):
        t1 = time.time()
        subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), cfg.rel] + args, cwd=d,
                       capture_output=True, input=c['stdin'] if c['stdin'] is not None else b'')
        res['release_seconds'] = round(time.time() - t1, 2)
    with open(d + '/result.json', 'w') as f:
        json.dump(res, f, indent=1)
    return res
