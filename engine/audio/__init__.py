"""Speech in the fleet's media: decoding (PyAV), voice activity (Silero VAD), recognition with
word times (Whisper tiny.en on CTranslate2), and the mapping of flagged transcript spans back
to the original media's time. Pure: no Kafka, no environment; every function takes its limits.

Pipeline of one item (:class:`rtaudit.engine.models.audio.AudioStage` runs it):

1. :func:`rtaudit.engine.audio.decode.decode_audio`: any container/codec → ``float32[n]`` mono 16 kHz;
2. :func:`rtaudit.engine.audio.vad.speech_segments`: where the speech is (silence costs nothing);
3. :class:`rtaudit.engine.audio.asr.WhisperRecognizer`: the speech segments → words with
   ``[start_s, end_s)`` in the original audio's time;
4. :meth:`rtaudit.engine.audio.transcript.Transcript.span_times`: a text-scorer span (code-point offsets into
   the transcript) → the time of the words it covers.
"""
