class ParseError(ValueError):
    """Raised when a string is not a valid ISO 8601 value."""

    def __init__(self, text, reason):
        super().__init__(f"cannot parse {text!r}: {reason}")
        self.text = text
        self.reason = reason
