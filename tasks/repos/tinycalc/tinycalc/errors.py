class CalcError(Exception):
    """Any error while tokenizing, parsing or evaluating an expression."""

    def __init__(self, message, position=None):
        if position is not None:
            message = f"{message} (at column {position})"
        super().__init__(message)
        self.position = position
