"""Encodes text with bmoe's own tokenizer (libbmoe.so through ctypes, the
public bmoe.h API) from any GGUF that carries the vocabulary, so the ids
the model is trained on are exactly the ids bmoe-cli feeds it."""
import ctypes
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class _Error(ctypes.Structure):
    _fields_ = [("message", ctypes.c_char * 512), ("status", ctypes.c_int)]


class Tokenizer:
    def __init__(self, gguf_path, library=os.path.join(ROOT, "build", "lib", "libbmoe.so")):
        self.lib = ctypes.CDLL(library)
        self.lib.bmoe_model_load.restype = ctypes.c_void_p
        self.lib.bmoe_model_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(_Error)]
        self.lib.bmoe_model_free.argtypes = [ctypes.c_void_p]
        self.lib.bmoe_tokenize.restype = ctypes.c_int32
        self.lib.bmoe_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool,
                                           ctypes.c_bool, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                           ctypes.POINTER(_Error)]
        err = _Error()
        self.model = self.lib.bmoe_model_load(gguf_path.encode(), None, ctypes.byref(err))
        if not self.model:
            raise RuntimeError("bmoe_model_load: " + err.message.decode())

    def encode(self, text, parse_special=False):
        data = text.encode("utf-8")
        capacity = len(data) + 16  # byte-level BPE: never more tokens than bytes
        out = (ctypes.c_int32 * capacity)()
        err = _Error()
        n = self.lib.bmoe_tokenize(self.model, data, len(data), False, parse_special, out, capacity,
                                   ctypes.byref(err))
        if n < 0 or n > capacity:
            raise RuntimeError("bmoe_tokenize: " + err.message.decode())
        return list(out[:n])

    def close(self):
        if self.model:
            self.lib.bmoe_model_free(self.model)
            self.model = None
