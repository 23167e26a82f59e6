"""Small deterministic programs, one per construct the recorder must get right."""

RECURSION = """
def fact(n):
    if n <= 1:
        return 1
    r = n * fact(n - 1)
    return r

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

x = fact(6)
y = fib(7)
big = fact(25)
"""

CLOSURES = """
def counter(start):
    count = start
    def inc(step=1):
        nonlocal count
        count += step
        return count
    def peek():
        return count
    return inc, peek

inc, peek = counter(10)
a = inc()
b = inc(5)
c = peek()
def outer():
    v = 1
    def mid():
        def inner():
            return v + 1
        return inner()
    v = 2
    return mid()
d = outer()
"""

GENERATORS = """
def squares(n):
    total = 0
    for i in range(n):
        sq = i * i
        total += sq
        got = yield sq
        if got:
            total = -got
    return total

g = squares(5)
first = next(g)
second = g.send(7)
rest = list(g)
evens = [x for x in range(10) if x % 2 == 0]
gen2 = sum(x * 2 for x in range(4))
def delegate():
    r = yield from squares(3)
    yield r
out = list(delegate())
"""

EXCEPTIONS = """
class Boom(Exception):
    pass

def fail(x):
    if x > 2:
        raise Boom(f"too big: {x}")
    return x

def guarded(x):
    try:
        y = fail(x)
    except Boom as e:
        msg = str(e)
        y = -1
    finally:
        done = True
    return y

r1 = guarded(1)
r2 = guarded(5)
try:
    fail(9)
except Boom:
    caught = True
def nested():
    try:
        try:
            raise ValueError("inner")
        except ValueError:
            raise KeyError("outer")
    except KeyError as k:
        return repr(k)
n = nested()
"""

THREADS = """
import threading

class Acc:
    def __init__(self, name):
        self.name = name
        self.total = 0

def work(acc, n):
    for i in range(n):
        acc.total = acc.total + i
    acc.done = True
    return acc.total

accs = [Acc("a"), Acc("b")]
ts = [threading.Thread(target=work, args=(accs[k], 5 + k)) for k in range(2)]
for t in ts:
    t.start()
    t.join()
totals = [a.total for a in accs]
"""

ASYNC = """
import asyncio

async def fetch(i):
    await asyncio.sleep(0)
    v = i * 10
    return v

async def main():
    a = await fetch(1)
    b = await fetch(2)
    total = a + b
    return total

result = asyncio.run(main())
"""

OBJECTS = """
class Point:
    label = "p"
    def __init__(self, x, y):
        self.x = x
        self.y = y
    def move(self, dx):
        self.x = self.x + dx
        return self

p = Point(1, 2.5)
q = Point("a", None)
p.move(3).move(-1)
p.z = [1, 2, 3]
del p.z
d = {"k": 1}
d["k"] = 2
d[(1, 2)] = "pair"
del d["k"]
lst = [0, 0, 0]
lst[1] = p
lst[0:2] = [9, 9]
alias = p
Point.label = "changed"
flag = True
f = 0.1 + 0.2
s = "x" * 300
del flag
"""

GLOBALS = """
total = 0
def add(n):
    global total
    total = total + n
    return total
add(3)
add(4)
import sys as _s
mod = _s.modules[__name__]
mod.extra = 5
"""

CLASS_BODY = """
class Config:
    a = 1
    b = a + 1
    def method(self):
        return self.b
    c = [a, b]

cfg = Config()
v = cfg.method()
"""

# Recorded code called back from the standard library's Python code (not recorded): a key
# function, generators drained by another generator, __deepcopy__, json's default, and an
# exception raised in a callback that crosses the library's frames back into recorded code.
LIBRARY_CALLBACKS = """
import copy
import heapq
import json


class Box:
    def __init__(self, v):
        self.v = v

    def __deepcopy__(self, memo):
        twin = Box(self.v * 2)
        twin.copied = True
        return twin


def key(x):
    k = -x
    return k


def evens(n):
    for i in range(n):
        if i % 2 == 0:
            yield i


def odds(n):
    for i in range(n):
        if i % 2:
            yield i


def fail(x):
    if x > 2:
        raise ValueError(x)
    return x


def encode(o):
    d = {"v": o.v}
    return d


small = heapq.nsmallest(2, [3, 1, 4, 1, 5], key=key)
merged = list(heapq.merge(evens(6), odds(6)))
originals = [Box(1), Box(2)]  # kept alive: a freed object's address may be the next one's
boxes = copy.deepcopy(originals)
text = json.dumps({"box": Box(3)}, default=encode)
try:
    heapq.nsmallest(2, [1, 2, 3, 4], key=fail)
except ValueError as e:
    caught = e.args[0]
total = sum(merged) + small[0] + boxes[0].v + len(text) + caught
"""

# Recorded code called back through the library's Python frames and C code at once, nested:
# re.sub's replacement function (re.sub and re._compile are Python, the substitution is C),
# which decodes JSON with an object_hook (json.loads and JSONDecoder.decode are Python, the
# scanner is C) and sorts with a key: recorded, not recorded, recorded, not recorded, recorded.
LIBRARY_C_CALLBACKS = """
import json
import re


def hook(d):
    d["seen"] = len(d)
    return d


def by_len(s):
    n = len(s)
    return n


def replace(m):
    word = m.group(0)
    obj = json.loads('{"w": "%s", "n": [1, 2]}' % word, object_hook=hook)
    parts = sorted([word, word * 2, "x"], key=by_len)
    return str(obj["seen"]) + parts[0]


text = re.sub(r"[a-z]+", replace, "ab cd efg")
found = [m.start() for m in re.finditer("b|d", text)]
again = re.sub("(x)", lambda m: m.group(1).upper(), text)
"""

ALL = {
    "recursion": RECURSION,
    "closures": CLOSURES,
    "generators": GENERATORS,
    "exceptions": EXCEPTIONS,
    "threads": THREADS,
    "async": ASYNC,
    "objects": OBJECTS,
    "globals": GLOBALS,
    "class_body": CLASS_BODY,
    "library_callbacks": LIBRARY_CALLBACKS,
    "library_c_callbacks": LIBRARY_C_CALLBACKS,
}
