"""A stand-in for nikss-ctl: records each argument list the NIKSS adapter would run."""


class Recorder:
    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, args) -> str:
        self.calls.append(list(args))
        return ""
