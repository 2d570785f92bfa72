"""The installed Python package against a real `keysmith serve` ($KEYSMITH_URL):
create a sequence, take a value, and a second one is larger. Run by
.ci/packages.sh in a fresh virtual environment holding only the sdist or wheel."""

import os
import sys
import uuid

from keysmith_client import Client

url = os.environ["KEYSMITH_URL"]
name = "py-smoke-" + uuid.uuid4().hex[:12]
with Client(url) as client:
    client.create_sequence(name)
    first = client.next(name)[0]
    second = client.next(name)[0]
    assert isinstance(first, int) and second > first, (first, second)
    seq = client.sequence(name)
    third = seq.next()
    assert third > second, (second, third)
print(f"python smoke ({sys.argv[1] if len(sys.argv) > 1 else 'package'}): {name} gave {first}, {second}, {third}")
