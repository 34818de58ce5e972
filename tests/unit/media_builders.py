"""Media made in the test: the project's own encoders and speech clips (``rtaudit.workers.demo_av``),
so the audio, video and animation tests run from a fresh clone."""

from rtaudit.workers.demo_av import (  # noqa: F401
    SPEECH, clip, decode_mono, encode_audio, encode_video, font, speech_with_insult, text_frame,
)
