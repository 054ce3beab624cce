import re


class RegexValidator:
    regex = ""
    flags = 0
    message = "Enter a valid value."

    def __call__(self, value):
        if not re.search(self.regex, value, self.flags):
            raise ValueError(self.message)


class ASCIIUsernameValidator(RegexValidator):
    regex = r"^[\w.@+-]+$"
    message = "Enter a valid username: English letters, numbers, and @/./+/-/_ only."
    flags = re.ASCII


class UnicodeUsernameValidator(RegexValidator):
    regex = r"^[\w.@+-]+$"
    message = "Enter a valid username: letters, numbers, and @/./+/-/_ only."
