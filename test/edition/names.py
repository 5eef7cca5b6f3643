#!/usr/bin/env python3
# test/edition/names.py SCRIPT...: every name in the SQL edition's function
# bodies that PostgreSQL looks up on the search_path is written so that only
# pg_catalog's can match.  The edition's functions run with their own schema
# on the path (SET search_path FROM CURRENT), and PostgreSQL takes an
# operator or function of that schema whose argument types match exactly
# over pg_catalog's that needs a cast (numeric = integer, text || integer,
# a polymorphic one): a role that may CREATE in that schema would run its
# own code as the caller, a superuser included.  So, in every body:
#   - an operator is OPERATOR(pg_catalog.op);
#   - a call of a function not the edition's own is pg_catalog.name(...);
#   - the constructs that look up "=" or another operator themselves (IN
#     and a list, a simple CASE, NULLIF, IS [NOT] DISTINCT FROM, BETWEEN,
#     LIKE, ILIKE, SIMILAR TO) only where test/edition/names.exact lists
#     them, with the types that make pg_catalog's operator the exact match;
#   - after PERFORM pg_catalog.set_config('search_path', 'pg_catalog,
#     pg_temp', true), up to the next set_config, anything (nothing but
#     pg_catalog is searched);
#   - every body written AS $name$ ... $name$, the form read here.
# Prints each name that breaks a rule (file:line: function: what), and each
# entry of names.exact that matched nothing; exits 1 when there is one.
import os, re, sys

OPCH = set('+-*/<>=~!@#%^&|`?')
def tokens(body, base_line):
    i, n, line = 0, len(body), base_line
    out = []
    while i < n:
        c = body[i]
        if c == '\n': line += 1; i += 1; continue
        if c.isspace(): i += 1; continue
        if body.startswith('--', i):
            j = body.find('\n', i); i = n if j < 0 else j; continue
        if body.startswith('/*', i):
            depth, j = 1, i + 2
            while depth and j < n:
                if body.startswith('/*', j): depth += 1; j += 2
                elif body.startswith('*/', j): depth -= 1; j += 2
                else: j += 1
            line += body.count('\n', i, j); i = j; continue
        if c in 'eE' and i + 1 < n and body[i+1] == "'":
            j = i + 2
            while j < n:
                if body[j] == '\\': j += 2; continue
                if body[j] == "'":
                    if j + 1 < n and body[j+1] == "'": j += 2; continue
                    break
                j += 1
            out.append(('str', body[i:j+1], line)); line += body.count('\n', i, j); i = j + 1; continue
        if c == "'":
            j = i + 1
            while j < n:
                if body[j] == "'":
                    if j + 1 < n and body[j+1] == "'": j += 2; continue
                    break
                j += 1
            out.append(('str', body[i:j+1], line)); line += body.count('\n', i, j); i = j + 1; continue
        if c == '$':
            m = re.match(r'\$([A-Za-z_][A-Za-z0-9_]*)?\$', body[i:])
            if m:
                tag = m.group(0); j = body.find(tag, i + len(tag))
                out.append(('str', body[i:j+len(tag)], line)); line += body.count('\n', i, j); i = j + len(tag); continue
            m = re.match(r'\$[0-9]+', body[i:]); out.append(('param', m.group(0), line)); i += len(m.group(0)); continue
        if c == '"':
            j = body.find('"', i + 1); out.append(('ident', body[i:j+1], line)); i = j + 1; continue
        if c.isalpha() or c == '_':
            m = re.match(r'[A-Za-z_][A-Za-z0-9_$]*', body[i:]); out.append(('ident', m.group(0), line)); i += len(m.group(0)); continue
        if c.isdigit() or (c == '.' and i + 1 < n and body[i+1].isdigit()):
            m = re.match(r'[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?|[0-9]+', body[i:])
            if body[i:].startswith('..'): out.append(('punct', '..', line)); i += 2; continue
            tok = m.group(0)
            if tok.endswith('.') : tok = tok[:-1]
            if body[i:i+len(tok)+2].endswith('..'): pass
            out.append(('num', tok, line)); i += len(tok); continue
        if body.startswith('::', i) or body.startswith(':=', i) or body.startswith('..', i):
            out.append(('punct', body[i:i+2], line)); i += 2; continue
        if c in OPCH:
            j = i
            while j < n and body[j] in OPCH and not body.startswith('--', j) and not body.startswith('/*', j): j += 1
            out.append(('op', body[i:j], line)); i = j; continue
        out.append(('punct', c, line)); i += 1
    return out


NOTCALL = set('''coalesce greatest least exists in any all some array row cast extract position substring trim overlay values
over filter within using on as from join where and or not select returning into if when then else case return query execute perform
lateral rows offset limit constraint check default variadic distinct by group order partition table insert update set conflict key
operator elsif while loop foreach raise with recursive union except intersect do nothing delete is null true false
numeric varchar char character timestamp timestamptz time interval bit decimal float double precision
'''.split())
IMPLICIT = {'nullif': 'NULLIF', 'between': 'BETWEEN', 'like': 'LIKE', 'ilike': 'ILIKE', 'similar': 'SIMILAR TO'}

exact = {}
for l in open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'names.exact'), encoding='utf-8'):
    if l.strip() and not l.startswith('#'):
        fn, rest = l.split(':', 1)
        exact[(fn.strip(), rest.split(' -- ')[0].strip())] = 0

bad = 0
for path in sys.argv[1:]:
    src = open(path, encoding='utf-8').read()
    lines = src.split('\n')
    fnames = set(m.lower() for m in re.findall(r'CREATE (?:OR REPLACE )?FUNCTION ([A-Za-z_][A-Za-z0-9_]*)\s*\(', src))
    bodies = list(re.finditer(r'\bAS (\$([A-Za-z_][A-Za-z0-9_]*)\$)(.*?)\1', src, re.S))
    # a body written otherwise ($$, a quoted string, a RETURN body) is one
    # this check cannot read: each CREATE FUNCTION must have a named one
    made = len(re.findall(r'CREATE (?:OR REPLACE )?FUNCTION ', src))
    if made != len(bodies):
        bad += 1
        print(f'{path}: {made} CREATE FUNCTION but {len(bodies)} bodies written AS $name$ ... $name$: write each so')
    for m in bodies:
        fn = m.group(2)
        t = tokens(m.group(3), src.count('\n', 0, m.start(3)) + 1)
        pinned = False
        for k, (kind, v, line) in enumerate(t):
            lv = v.lower()
            prev = [x[1].lower() for x in t[max(0, k - 6):k]]
            nxt = t[k + 1][1].lower() if k + 1 < len(t) else ''

            def report(what):
                global bad
                bad += 1
                print(f'{path}:{line}: {fn}: {what}')

            def listed(construct):
                for key in exact:
                    if key[0] == fn and key[1] in lines[line - 1]:
                        exact[key] += 1
                        return
                report(f'{construct} looks its operator up on the search_path (names.exact lists none for this line)')

            if lv == 'set_config' and nxt == '(':
                pinned = (k + 4 < len(t) and t[k + 2][1] == "'search_path'"
                          and t[k + 4][1] == "'pg_catalog, pg_temp'")
            if pinned:
                continue
            if kind == 'op':
                if prev[-3:] == ['(', 'pg_catalog', '.'] and prev[-4:-3] == ['operator'] and nxt == ')':
                    continue
                if v == '=>':                   # a named argument
                    continue
                if v == '*' and prev[-1:] in (['select'], [','], ['.'], ['(']):
                    continue
                # an assignment: UPDATE's SET, RAISE's USING, GET DIAGNOSTICS
                if v == '=' and (prev[-2:-1] in (['set'], [','], ['diagnostics'])
                                 or prev[-1:] in (['errcode'], ['message'], ['detail'], ['hint'])):
                    continue
                # a negative constant: the parser folds it, looking nothing up
                if v == '-' and t[k + 1][0] == 'num' and (
                        t[k - 1][0] == 'op' or prev[-1] in ('(', ',', '[', ':=', 'then', 'else', 'return', 'when', 'select')
                        or prev[-6:] and prev[-6] == 'operator' and prev[-1] == ')'):
                    continue
                report(f'operator {v} not written OPERATOR(pg_catalog.{v})')
            elif kind == 'ident':
                if lv in IMPLICIT:
                    listed(IMPLICIT[lv])
                elif lv == 'distinct' and (prev[-1:] == ['is'] or prev[-2:] == ['is', 'not']):
                    listed('IS DISTINCT FROM')
                elif lv == 'case' and nxt != 'when' and prev[-1:] != ['end']:
                    listed('a simple CASE')
                elif lv == 'in' and nxt == '(':
                    listed('IN (a list)')
                elif (nxt == '(' and lv not in fnames and lv not in NOTCALL and prev[-1:] != ['.']
                      and prev[-1:] not in (['as'], ['into'])):
                    report(f'call {v}(...) not written pg_catalog.{v}(...)')
for key, n in exact.items():
    if n == 0:
        bad += 1
        print(f'test/edition/names.exact: {key[0]}: {key[1]}: matches nothing')
print(f'{bad} names not pinned to pg_catalog', file=sys.stderr)
sys.exit(1 if bad else 0)
