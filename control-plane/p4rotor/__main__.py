"""`python -m p4rotor`: the same CLI as `p4rotor`."""

from .cli import main

raise SystemExit(main())
