"""Media made in the test: the project's own encoders and speech clips (``rtaudit.tools.demo.clips``),
so the audio, video and animation tests run from a fresh clone."""

from rtaudit.tools.demo.clips import (  # noqa: F401
    SPEECH, clip, decode_mono, encode_audio, encode_video, font, speech_with_insult, text_frame,
)
