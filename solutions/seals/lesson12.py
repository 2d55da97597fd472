"""The plain values behind the seals of course_lib/checks/lesson12.py, the hand-worked answers of
solutions/12_*.ipynb and the values of the mistakes their hints name.

`course seal lesson12` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "kv_bytes_per_token": (None, 57344, {
        "used the 28 query heads: only the 4 key/value heads are cached (GQA)": 401408,
        "are off by a factor 2, too small: either you left out the 2 for a key AND a value, or you counted values, "
        "not bytes (2 bytes per bf16 value)":
            28672,
        "counted 4 bytes per value: bf16 takes 2 bytes": 114688,
        "counted one layer: every one of the 28 layers keeps its own cache": 2048,
        "used the model width, 28 x 128 = 3,584, as the key width: a key/value head is 128 wide": 1605632,
    }),
    "kv_cache_gib": (2, 1.75, {
        "divided by 10^9 (GB): a GiB is 2^30 = 1,073,741,824 bytes": 1.88,
        "used the 28 query heads: only the 4 key/value heads are cached (GQA)": 12.25,
        "left out the factor 2: every layer caches a key AND a value": 0.88,
        "counted 4 bytes per value: bf16 takes 2 bytes": 3.5,
        "gave MiB: divide by 2^30 for GiB, not 2^20": 1792,
        "used 32,000 tokens: 32k here is 32,768 = 2^15": 1.71,
    }),
    "d_ff_equal": (None, 2048, {
        "kept the GELU network's 4 x d_model (or counted two matrices for SwiGLU): w1, w3 and w2 make three, so the "
        "hidden width shrinks":
            3072,
        "gave the parameter count: the answer is the hidden width d_ff": 4718592,
        "divided 4 x d_model by 2 instead of 2 x 4 x d_model by 3": 1536,
    }),
    "d_ff_llama": (None, 11008, {
        "rounded down: Llama 2 rounds 8/3 x d_model UP to the next multiple of 256": 10752,
        "did not round: Llama 2's width is a multiple of 256": 10922,
        "rounded 8/3 x d_model to the nearest integer only: Llama 2 rounds up to a multiple of 256": 10923,
        "used 4 x d_model, the GELU network's width": 16384,
        "gave Llama 3 8B's (and Mistral 7B's) width, 3.5 x d_model: that is a later, wider choice; the question "
        "asks for Llama 2's rule, 8/3 x d_model rounded up to a multiple of 256":
            14336,
    }),
    "m_new": (3, 3.0, {
        "kept the old maximum: the new maximum is the larger of the old one and this block's largest score": 2.0,
        "took this block's smallest score: the running maximum is the largest score seen so far": 1.0,
        "added the maxima: the new maximum is max(m_old, max(s_new))": 5.0,
    }),
    "l_new": (3, 1.687, {
        "did not rescale the old sum: multiply l_old by exp(m_old - m_new) before adding the new block's terms": 2.635,
        "rescaled by exp(m_new - m_old): the old terms were exp(s - m_old) and must become exp(s - m_new), so "
        "multiply by exp(m_old - m_new) (less than 1)":
            5.213,
        "added exp(s) without subtracting the new maximum: the new terms are exp(s - m_new)": 23.356,
    }),
    "out_new": (3, [0.724, 0.095], {
        "did not rescale the old weighted sum: acc_old must be multiplied by exp(m_old - m_new) too": [0.948, -0.017],
        "did not rescale the old sum l: both l_old and acc_old are multiplied by exp(m_old - m_new)": [0.463, 0.061],
        "gave the weighted sum acc without dividing by l: the output is acc / l": [1.221, 0.16],
        "rescaled by exp(m_new - m_old): the correction factor is exp(m_old - m_new)": [0.505, -0.105],
        "added exp(s) without subtracting the new maximum: the new terms are exp(s - m_new)": [0.869, 0.228],
    }),
}
