"""p4rotor: emulate rotor and selector optical circuit switches on BMv2 with P4Runtime."""

__version__ = "0.1.0"
