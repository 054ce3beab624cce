import unittest

from django.contrib.auth import validators
from django.contrib.auth.password_validation import MinimumLengthValidator


class UsernameValidatorsTests(unittest.TestCase):
    def test_unicode_validator(self):
        valid_usernames = ["joe", "René", "ᴮᴵᴳᴮᴵᴿᴰ", "أحمد"]
        invalid_usernames = [
            "o'connell",
            "عبد ال",
            "zerowidth\u200bspace",
            "nonbreaking\u00a0space",
        ]
        v = validators.UnicodeUsernameValidator()
        for valid in valid_usernames:
            v(valid)
        for invalid in invalid_usernames:
            with self.assertRaises(ValueError, msg=repr(invalid)):
                v(invalid)

    def test_ascii_validator(self):
        valid_usernames = ["glenn", "GLEnN", "jean-marc"]
        invalid_usernames = ["o'connell", "Éric", "jean marc", "أحمد"]
        v = validators.ASCIIUsernameValidator()
        for valid in valid_usernames:
            v(valid)
        for invalid in invalid_usernames:
            with self.assertRaises(ValueError, msg=repr(invalid)):
                v(invalid)


class MinimumLengthValidatorTest(unittest.TestCase):
    def test_validate(self):
        MinimumLengthValidator().validate("12345678")
        with self.assertRaises(ValueError):
            MinimumLengthValidator().validate("1234567")
