// Infer.cs - a C# binding of infer.h's shared library (libinfer.so,
// infer.dll) for Unity (Mono and IL2CPP) and plain Mono/.NET.
//
// One file, no unsafe code, no dependency but mscorlib and System: drop it
// into a Unity project's Assets/ (see README.md). It declares the C API
// itself (P/Invoke), so at first use it checks that the library is the one
// it was written for: infer_abi_version() and the size of every struct it
// mirrors (InferLibrary.EnsureCompatible).
//
// Rules it follows because of IL2CPP and Unity's Mono:
//  - no struct passed or returned by value (the *_init / *_into calls);
//  - strings marshalled by hand as UTF-8 (not every Unity runtime has
//    UnmanagedType.LPUTF8Str);
//  - native handles in SafeHandles, passed to C as IntPtr under
//    DangerousAddRef, so a handle is never freed during a call and the
//    freeing order holds: a request keeps its context alive, a context
//    its model;
//  - callbacks are static methods marked [MonoPInvokeCallback], reaching
//    their object through a GCHandle passed as C's `user` pointer;
//    exceptions never cross into C: a callback's exception is kept and
//    rethrown on the caller's thread once C returns.
using System;
using System.Collections.Generic;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

// the tests read the list of mirrored structs
[assembly: System.Runtime.CompilerServices.InternalsVisibleTo("InferTests")]

#if !UNITY_5_3_OR_NEWER
namespace AOT
{
    // Unity defines this attribute in UnityEngine; IL2CPP looks for it by
    // name on a static method before it lets C call the method through a
    // delegate's function pointer. Outside Unity it only has to exist.
    [AttributeUsage(AttributeTargets.Method)]
    internal sealed class MonoPInvokeCallbackAttribute : Attribute
    {
        public MonoPInvokeCallbackAttribute(Type type) { }
    }
}
#endif

namespace Infer
{
    /// <summary>infer_status, the code of an InferException.</summary>
    public enum Status
    {
        Ok = 0,
        IO,
        Format,
        Unsupported,
        NoMemory,
        Argument,
        ContextFull,
        Device,
        Cancelled,
    }

    public enum Device { Cpu = 0, Cuda, Auto }

    public enum RopeScaling { File = 0, None, Linear, Yarn }

    /// <summary>The KV cache's format (infer_context_params.kv_type).</summary>
    public enum KvType { F16 = 1, Q8_0 = 8, Q4_0 = 2 }

    public enum FullPolicy { Stop = 0, Shift }

    public enum Pooling { Mean = 0, Last, First }

    /// <summary>infer_chat_kind: the conversation formats infer.h writes.</summary>
    public enum ChatKind
    {
        ChatML = 0, Llama2, Mistral, MistralV1, MistralV3, MistralV3Tekken, MistralV7, Llama3, Gemma, Phi3,
        Zephyr, DeepSeek, DeepSeek2, DeepSeek3, Llama31, Qwen3, Phi4, Phi4Mini, SmolLM3, MistralV7Tekken,
    }

    /// <summary>A failure the library reported: its status and its one-line message (infer_error.msg).</summary>
    public class InferException : Exception
    {
        public Status Status { get; private set; }

        public InferException(Status status, string message, Exception inner = null) : base(message, inner)
        {
            Status = status;
        }
    }

    /// <summary>The native library is missing, or is not the version this binding was written for.</summary>
    public class InferLibraryException : Exception
    {
        public InferLibraryException(string message, Exception inner = null) : base(message, inner) { }
    }

    /// <summary>infer_sampler_params, mirrored field for field (blittable).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct SamplerParams
    {
        public float Temperature;   // <= 0: greedy
        public int TopK;            // <= 0: off
        public float TopP;          // >= 1: off
        public float MinP;          // <= 0: off
        public float RepeatPenalty; // 1: off
        public int RepeatLastN;
        public ulong Seed;

        /// <summary>The library's defaults (infer_sampler_params_init).</summary>
        public static SamplerParams Default
        {
            get
            {
                InferLibrary.EnsureCompatible();
                var p = new SamplerParams();
                Native.infer_sampler_params_init(ref p);
                return p;
            }
        }

        /// <summary>The defaults with temperature 0: always the most probable token.</summary>
        public static SamplerParams Greedy
        {
            get
            {
                var p = Default;
                p.Temperature = 0;
                return p;
            }
        }
    }

    /// <summary>infer_token_prob (blittable).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct TokenProb
    {
        public int Id;
        public float P;
    }

    /// <summary>infer_metrics, copied into managed types.</summary>
    public struct Metrics
    {
        public double LoadMs, PromptMs, PromptTps, TtftMs, GenMs, GenTps, TokenMsMin, TokenMsAvg, TokenMsMax;
        public int PromptTokens, GenTokens, GenIntervals, DraftTokens, DraftAccepted;
        public long ModelBytes, ContextBytes, PeakRssBytes;

        internal Metrics(ref Native.MetricsNative m)
        {
            LoadMs = m.load_ms;
            PromptTokens = m.n_prompt_tokens;
            PromptMs = m.prompt_ms;
            PromptTps = m.prompt_tps;
            TtftMs = m.ttft_ms;
            GenTokens = m.n_gen_tokens;
            GenIntervals = m.n_gen_intervals;
            GenMs = m.gen_ms;
            GenTps = m.gen_tps;
            TokenMsMin = m.token_ms_min;
            TokenMsAvg = m.token_ms_avg;
            TokenMsMax = m.token_ms_max;
            DraftTokens = m.n_draft_tokens;
            DraftAccepted = m.n_draft_accepted;
            ModelBytes = (long)m.model_bytes.ToUInt64();
            ContextBytes = (long)m.context_bytes.ToUInt64();
            PeakRssBytes = (long)m.peak_rss_bytes.ToUInt64();
        }
    }

    /// <summary>The native library itself: its version and the compatibility check.</summary>
    public static class InferLibrary
    {
        /// <summary>The INFER_ABI_VERSION this binding's declarations were written against.</summary>
        public const int AbiVersion = 2;

        /// <summary>The library's file name: libinfer.so (Linux, Android), infer.dll (Windows),
        /// libinfer.dylib (macOS); "__Internal" on iOS, where it is linked in statically.</summary>
        public const string Name = Native.Lib;

        static readonly object gate = new object();
        static bool checkedOnce;
        static Exception failure;

        /// <summary>The implementation's version, e.g. "0.25.0".</summary>
        public static string Version
        {
            get
            {
                EnsureCompatible();
                return Utf8.FromNative(Native.infer_version());
            }
        }

        /// <summary>Loads the library once and checks that its ABI version and the size of every
        /// struct this binding mirrors match; throws InferLibraryException (every time) where not.
        /// Everything that creates an object calls it first.</summary>
        public static void EnsureCompatible()
        {
            lock (gate)
            {
                if (!checkedOnce)
                {
                    checkedOnce = true;
                    try
                    {
                        string problem = Check(Native.infer_abi_version(), id => (long)Native.infer_struct_size(id).ToUInt64());
                        if (problem != null) failure = new InferLibraryException(problem);
                    }
                    catch (DllNotFoundException e)
                    {
                        failure = new InferLibraryException("the native library '" + Name + "' (libinfer.so, infer.dll) was not found: " +
                                                            "put it where the runtime looks (Unity: Assets/Plugins/...; Mono: LD_LIBRARY_PATH)", e);
                    }
                    catch (EntryPointNotFoundException e)
                    {
                        failure = new InferLibraryException("the native library '" + Name + "' lacks infer_abi_version: it is older than " +
                                                            "the ABI checks (INFER_ABI_VERSION " + AbiVersion + ")", e);
                    }
                }
                if (failure != null) throw new InferLibraryException(failure.Message, failure.InnerException);
            }
        }

        // The structs this binding mirrors, as infer_struct_id numbers them.
        internal static readonly KeyValuePair<int, Type>[] Mirrored =
        {
            new KeyValuePair<int, Type>(0, typeof(Native.ErrorNative)),
            new KeyValuePair<int, Type>(1, typeof(Native.ModelParamsNative)),
            new KeyValuePair<int, Type>(2, typeof(Native.ContextParamsNative)),
            new KeyValuePair<int, Type>(4, typeof(SamplerParams)),
            new KeyValuePair<int, Type>(5, typeof(TokenProb)),
            new KeyValuePair<int, Type>(6, typeof(Native.MetricsNative)),
            new KeyValuePair<int, Type>(7, typeof(Native.RequestParamsNative)),
            new KeyValuePair<int, Type>(10, typeof(Native.ChatTemplateNative)),
            new KeyValuePair<int, Type>(11, typeof(Native.ChatMessageNative)),
        };

        /// <summary>What is wrong with a library of ABI version libAbi whose struct sizes
        /// structSize gives, or null when it is the one this binding was written for.</summary>
        public static string Check(int libAbi, Func<int, long> structSize)
        {
            if (libAbi != AbiVersion)
                return "the native library '" + Name + "' has ABI version " + libAbi + ", this binding was written for " +
                       AbiVersion + ": use the Infer.cs that came with that library";
            var bad = new StringBuilder();
            foreach (var kv in Mirrored)
            {
                long theirs = structSize(kv.Key), ours = Marshal.SizeOf(kv.Value);
                if (theirs != ours)
                    bad.Append(bad.Length > 0 ? ", " : "").Append(kv.Value.Name.Replace("Native", "")).Append(" is ")
                       .Append(theirs).Append(" bytes in the library, ").Append(ours).Append(" here");
            }
            return bad.Length == 0 ? null : "the native library '" + Name + "' does not match this binding (ABI version " +
                                            AbiVersion + "): " + bad;
        }
    }

    // ---- handles ---------------------------------------------------------

    /// <summary>A native object of the library; released (freed) once, by Dispose or by the finalizer.</summary>
    public abstract class InferHandle : SafeHandle
    {
        protected InferHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        internal void Attach(IntPtr p) { SetHandle(p); }

        // The pointer for one native call, the handle held meanwhile so that
        // no other thread (or the finalizer) frees it under the call.
        internal Lease Lease() { return new Lease(this); }
    }

    internal struct Lease : IDisposable
    {
        readonly SafeHandle h;
        readonly bool added;
        public readonly IntPtr Ptr;

        public Lease(SafeHandle handle)
        {
            h = handle;
            added = false;
            handle.DangerousAddRef(ref added); // ObjectDisposedException once closed
            Ptr = handle.DangerousGetHandle();
        }

        public void Dispose()
        {
            if (added) h.DangerousRelease();
        }
    }

    public sealed class ModelHandle : InferHandle
    {
        internal IntPtr memory; // the GGUF bytes of LoadFromMemory, which the model reads in place

        protected override bool ReleaseHandle()
        {
            Native.infer_model_free(handle);
            if (memory != IntPtr.Zero) Marshal.FreeHGlobal(memory);
            memory = IntPtr.Zero;
            return true;
        }
    }

    public sealed class ContextHandle : InferHandle
    {
        internal ModelHandle model;       // referenced: the model is freed after the context
        internal readonly object Sync = new object(); // one thread at a time in the context (C's rule)
        internal GCHandle abortBox;

        protected override bool ReleaseHandle()
        {
            lock (Sync) Native.infer_context_free(handle);
            if (abortBox.IsAllocated) abortBox.Free();
            if (model != null) model.DangerousRelease();
            return true;
        }
    }

    public sealed class SamplerHandle : InferHandle
    {
        protected override bool ReleaseHandle()
        {
            Native.infer_sampler_free(handle);
            return true;
        }
    }

    public sealed class RequestHandle : InferHandle
    {
        internal ContextHandle context;   // referenced: requests are freed before their context
        internal WorkerHandle worker;     // the worker that steps it, or null
        internal GCHandle box;            // its progress callback's box, or unallocated

        protected override bool ReleaseHandle()
        {
            // infer_request_free must not run beside a step of its context,
            // nor beside infer_worker_free of its worker
            if (worker != null)
            {
                lock (worker.Sync)
                    lock (context.Sync) Native.infer_request_free(handle);
            }
            else
            {
                lock (context.Sync) Native.infer_request_free(handle);
            }
            if (box.IsAllocated) box.Free();
            context.DangerousRelease();
            return true;
        }
    }

    public sealed class WorkerHandle : InferHandle
    {
        internal readonly object Sync = new object();
        internal readonly List<object> contexts = new List<object>(); // its contexts' Sync objects

        protected override bool ReleaseHandle()
        {
            // infer_worker_free ends its contexts' requests: no step, start
            // or free of theirs meanwhile
            lock (Sync)
            {
                var held = new List<object>();
                try
                {
                    foreach (var sync in contexts)
                    {
                        Monitor.Enter(sync);
                        held.Add(sync);
                    }
                    Native.infer_worker_free(handle);
                }
                finally
                {
                    foreach (var sync in held) Monitor.Exit(sync);
                }
                contexts.Clear();
            }
            return true;
        }
    }

    // ---- model -----------------------------------------------------------

    /// <summary>infer_model_params.</summary>
    public sealed class ModelOptions
    {
        public bool VocabOnly;
        public Device Device;
        public RopeScaling RopeScaling;
        public float RopeScale;
        /// <summary>Called during the load with the share done (0 to 1), on the loading thread;
        /// return false to cancel it.</summary>
        public Func<float, bool> Progress;

        public ModelOptions()
        {
            InferLibrary.EnsureCompatible();
            var p = new Native.ModelParamsNative();
            Native.infer_model_params_init(ref p);
            VocabOnly = p.vocab_only != 0;
            Device = (Device)p.device;
            RopeScaling = (RopeScaling)p.rope_scaling;
            RopeScale = p.rope_scale;
        }
    }

    /// <summary>A loaded GGUF model: read-only, shared by any number of contexts on any threads.</summary>
    public sealed class Model : IDisposable
    {
        public readonly ModelHandle Handle;

        Model(ModelHandle h) { Handle = h; }

        /// <summary>Loads a GGUF file. Throws InferException with the library's message.</summary>
        public static Model Load(string path, ModelOptions options = null)
        {
            if (path == null) throw new ArgumentNullException("path");
            return LoadWith(options, (ref Native.ModelParamsNative p, out Native.ErrorNative e) =>
                Native.infer_model_load(Utf8.ToNative(path), ref p, out e), IntPtr.Zero);
        }

        /// <summary>Loads a model from a GGUF file's bytes (e.g. read from an Android APK's
        /// StreamingAssets). They are copied once into native memory that the model keeps.</summary>
        public static Model LoadFromMemory(byte[] gguf, ModelOptions options = null)
        {
            if (gguf == null) throw new ArgumentNullException("gguf");
            InferLibrary.EnsureCompatible();
            IntPtr mem = Marshal.AllocHGlobal(Math.Max(gguf.Length, 1));
            Marshal.Copy(gguf, 0, mem, gguf.Length);
            try
            {
                return LoadWith(options, (ref Native.ModelParamsNative p, out Native.ErrorNative e) =>
                    Native.infer_model_load_memory(mem, (UIntPtr)(ulong)gguf.Length, ref p, out e), mem);
            }
            catch
            {
                Marshal.FreeHGlobal(mem);
                throw;
            }
        }

        delegate IntPtr Loader(ref Native.ModelParamsNative p, out Native.ErrorNative e);

        static Model LoadWith(ModelOptions options, Loader load, IntPtr memory)
        {
            InferLibrary.EnsureCompatible();
            if (options == null) options = new ModelOptions();
            var p = new Native.ModelParamsNative();
            Native.infer_model_params_init(ref p);
            p.vocab_only = options.VocabOnly ? 1 : 0;
            p.device = (int)options.Device;
            p.rope_scaling = (int)options.RopeScaling;
            p.rope_scale = options.RopeScale;
            var box = options.Progress != null ? new CallbackBox { Progress = options.Progress } : null;
            GCHandle gch = default(GCHandle);
            if (box != null)
            {
                gch = GCHandle.Alloc(box);
                p.progress = Callbacks.ProgressPtr;
                p.progress_user = GCHandle.ToIntPtr(gch);
            }
            var h = new ModelHandle();
            try
            {
                Native.ErrorNative e;
                IntPtr m = load(ref p, out e);
                if (m == IntPtr.Zero)
                {
                    if (box != null && box.Error != null) throw new InferException(Status.Cancelled, e.Message, box.Error);
                    throw e.ToException();
                }
                h.Attach(m);
                h.memory = memory;
                return new Model(h);
            }
            finally
            {
                if (gch.IsAllocated) gch.Free();
            }
        }

        public void Dispose() { Handle.Dispose(); }

        public int NVocab { get { using (var l = Handle.Lease()) return Native.infer_model_n_vocab(l.Ptr); } }
        public int NCtxTrain { get { using (var l = Handle.Lease()) return Native.infer_model_n_ctx_train(l.Ptr); } }
        /// <summary>The length of an embedding (the hidden size).</summary>
        public int NEmbd { get { using (var l = Handle.Lease()) return Native.infer_model_n_embd(l.Ptr); } }
        public int Bos { get { using (var l = Handle.Lease()) return Native.infer_model_bos(l.Ptr); } }
        public int Eos { get { using (var l = Handle.Lease()) return Native.infer_model_eos(l.Ptr); } }
        public bool AddsBos { get { using (var l = Handle.Lease()) return Native.infer_model_add_bos(l.Ptr) != 0; } }
        public double LoadMs { get { using (var l = Handle.Lease()) return Native.infer_model_load_ms(l.Ptr); } }
        public Device Device { get { using (var l = Handle.Lease()) return (Device)Native.infer_model_device(l.Ptr); } }

        /// <summary>A line to show the user about how the file was read, or null.</summary>
        public string Warning { get { using (var l = Handle.Lease()) return Utf8.FromNative(Native.infer_model_warning(l.Ptr)); } }

        /// <summary>Architecture, dims, layers, heads, vocab in one line.</summary>
        public string Description
        {
            get
            {
                using (var l = Handle.Lease())
                {
                    var buf = new byte[512];
                    UIntPtr n;
                    Native.ErrorNative e;
                    if (Native.infer_model_describe(l.Ptr, buf, (UIntPtr)(ulong)buf.Length, out n, out e) != 0) throw e.ToException();
                    return Utf8.FromBuffer(buf, (int)Math.Min((ulong)n, (ulong)(buf.Length - 1)));
                }
            }
        }

        public bool IsEndOfGeneration(int token)
        {
            using (var l = Handle.Lease()) return Native.infer_model_is_eog(l.Ptr, token) != 0;
        }

        /// <summary>The token ids of text. addBos: put the BOS token first (null: where the model adds
        /// one, as prompts get it); parseSpecial: "&lt;|im_end|&gt;" and the like become their special tokens.</summary>
        public int[] Tokenize(string text, bool? addBos = null, bool parseSpecial = false)
        {
            byte[] b = Encoding.UTF8.GetBytes(text ?? "");
            using (var l = Handle.Lease())
            {
                int bos = (addBos.HasValue ? addBos.Value : Native.infer_model_add_bos(l.Ptr) != 0) ? 1 : 0;
                var toks = new int[b.Length + 2];
                Native.ErrorNative e;
                int n;
                int st = Native.infer_tokenize(l.Ptr, b, (UIntPtr)(ulong)b.Length, toks, toks.Length, bos, parseSpecial ? 1 : 0,
                                               out n, out e);
                if (st == 0 && n > toks.Length)
                {
                    toks = new int[n];
                    st = Native.infer_tokenize(l.Ptr, b, (UIntPtr)(ulong)b.Length, toks, toks.Length, bos, parseSpecial ? 1 : 0,
                                               out n, out e);
                }
                if (st != 0) throw e.ToException();
                Array.Resize(ref toks, n);
                return toks;
            }
        }

        /// <summary>The bytes of one token's text (not always whole UTF-8 characters).</summary>
        public byte[] TokenBytes(int token)
        {
            using (var l = Handle.Lease())
            {
                var buf = new byte[64];
                UIntPtr len;
                Native.ErrorNative e;
                if (Native.infer_token_to_piece(l.Ptr, token, buf, (UIntPtr)(ulong)buf.Length, out len, out e) != 0)
                    throw e.ToException();
                int n = (int)(ulong)len;
                if (n >= buf.Length)
                {
                    buf = new byte[n + 1];
                    if (Native.infer_token_to_piece(l.Ptr, token, buf, (UIntPtr)(ulong)buf.Length, out len, out e) != 0)
                        throw e.ToException();
                }
                Array.Resize(ref buf, n);
                return buf;
            }
        }

        /// <summary>The bytes of tokens' texts one after the other.</summary>
        public byte[] DetokenizeBytes(IEnumerable<int> tokens)
        {
            var ms = new MemoryStream();
            foreach (int t in tokens)
            {
                byte[] b = TokenBytes(t);
                ms.Write(b, 0, b.Length);
            }
            return ms.ToArray();
        }

        /// <summary>The text of tokens (invalid UTF-8 shown as U+FFFD).</summary>
        public string Detokenize(IEnumerable<int> tokens) { return Encoding.UTF8.GetString(DetokenizeBytes(tokens)); }

        /// <summary>The model's chat format, from its tokenizer.chat_template.</summary>
        public ChatTemplate DetectChatTemplate()
        {
            var t = Native.ChatTemplateNative.Empty();
            using (var l = Handle.Lease()) Native.infer_chat_template_detect_into(l.Ptr, ref t);
            return new ChatTemplate(t);
        }

        /// <summary>A context on this model (KV cache and scratch).</summary>
        public Context NewContext(ContextOptions options = null) { return new Context(this, options); }
    }

    // ---- context ---------------------------------------------------------

    /// <summary>infer_context_params.</summary>
    public sealed class ContextOptions
    {
        public int NCtx;       // positions per sequence; 0 = min(model's, 4096)
        public int NBatch;     // 0 = 512
        public int NThreads;   // kernel threads; 0 = 1
        public int NSeq;       // sequences (conversations); 0 = 1
        public KvType KvType;
        public int MatchLlama;
        public FullPolicy FullPolicy;
        public int NKeep;

        public ContextOptions()
        {
            InferLibrary.EnsureCompatible();
            var p = new Native.ContextParamsNative();
            Native.infer_context_params_init(ref p);
            NCtx = p.n_ctx;
            NBatch = p.n_batch;
            NThreads = p.n_threads;
            NSeq = p.n_seq;
            KvType = p.kv_type == 0 ? KvType.F16 : (KvType)p.kv_type;
            MatchLlama = p.match_llama;
            FullPolicy = (FullPolicy)p.full_policy;
            NKeep = p.n_keep;
        }
    }

    /// <summary>A KV cache of NSeq sequences (conversations) that decode together, and the
    /// requests that run on them. The binding lets one thread at a time into it (a lock), as C requires.</summary>
    public sealed class Context : IDisposable
    {
        public readonly ContextHandle Handle;
        public readonly Model Model;
        CallbackBox abortBox;

        public Context(Model model, ContextOptions options = null)
        {
            if (model == null) throw new ArgumentNullException("model");
            if (options == null) options = new ContextOptions();
            var p = new Native.ContextParamsNative();
            Native.infer_context_params_init(ref p);
            p.n_ctx = options.NCtx;
            p.n_batch = options.NBatch;
            p.n_threads = options.NThreads;
            p.n_seq = options.NSeq;
            p.kv_type = (int)options.KvType;
            p.match_llama = options.MatchLlama;
            p.full_policy = (int)options.FullPolicy;
            p.n_keep = options.NKeep;
            Model = model;
            Handle = new ContextHandle();
            bool added = false;
            model.Handle.DangerousAddRef(ref added);
            Native.ErrorNative e;
            IntPtr c = Native.infer_context_new(model.Handle.DangerousGetHandle(), ref p, out e);
            if (c == IntPtr.Zero)
            {
                model.Handle.DangerousRelease();
                throw e.ToException();
            }
            Handle.model = model.Handle;
            Handle.Attach(c);
        }

        public void Dispose() { Handle.Dispose(); }

        public int NCtx { get { using (var l = Handle.Lease()) return Native.infer_context_n_ctx(l.Ptr); } }
        public int NSeq { get { using (var l = Handle.Lease()) return Native.infer_context_n_seq(l.Ptr); } }
        /// <summary>The kernels' instruction set: scalar, avx2, avx512, neon or wasm.</summary>
        public string Isa { get { using (var l = Handle.Lease()) return Utf8.FromNative(Native.infer_context_isa(l.Ptr)); } }

        public Metrics Metrics
        {
            get
            {
                var m = new Native.MetricsNative();
                using (var l = Handle.Lease()) Native.infer_context_metrics_into(l.Ptr, ref m);
                return new Metrics(ref m);
            }
        }

        /// <summary>Called between the layers of every forward pass, on the thread that runs it;
        /// return true to stop the pass (it fails with Status.Cancelled). null removes it.</summary>
        public void SetAbort(Func<bool> abort)
        {
            lock (Handle.Sync)
            {
                using (var l = Handle.Lease())
                {
                    if (abort == null)
                    {
                        Native.infer_context_set_abort(l.Ptr, IntPtr.Zero, IntPtr.Zero);
                        abortBox = null;
                        if (Handle.abortBox.IsAllocated) Handle.abortBox.Free();
                        return;
                    }
                    var box = new CallbackBox { Abort = abort };
                    var old = Handle.abortBox;
                    Handle.abortBox = GCHandle.Alloc(box);
                    Native.infer_context_set_abort(l.Ptr, Callbacks.AbortPtr, GCHandle.ToIntPtr(Handle.abortBox));
                    abortBox = box;
                    if (old.IsAllocated) old.Free();
                }
            }
        }

        // An abort callback's exception, rethrown once C has returned.
        void RethrowAbort()
        {
            var box = abortBox;
            if (box != null && box.Error != null)
            {
                var ex = box.Error;
                box.Error = null;
                throw new InferException(Status.Cancelled, "the abort callback threw: " + ex.Message, ex);
            }
        }

        // ---- requests: the game loop

        /// <summary>Queues a request (infer_request_start). It runs when Step is called.</summary>
        public Request Start(RequestOptions options) { return StartOn(null, options); }

        internal Request StartOn(Worker worker, RequestOptions options)
        {
            if (options == null) throw new ArgumentNullException("options");
            var rh = new RequestHandle();
            bool added = false;
            Handle.DangerousAddRef(ref added); // held by the request from here on
            CallbackBox box = null;
            IntPtr r = IntPtr.Zero;
            Native.ErrorNative e = new Native.ErrorNative();
            try
            {
                using (var strings = new NativeStrings()) // freed at once: the library copies what it keeps
                {
                    var p = options.ToNative(strings);
                    if (options.Progress != null)
                    {
                        box = new CallbackBox { Progress = options.Progress };
                        rh.box = GCHandle.Alloc(box);
                        p.progress = Callbacks.ProgressPtr;
                        p.progress_user = GCHandle.ToIntPtr(rh.box);
                    }
                    if (worker == null)
                    {
                        lock (Handle.Sync) r = Native.infer_request_start(Handle.DangerousGetHandle(), ref p, out e);
                    }
                    else
                    {
                        // the order of locks everywhere: worker, then context
                        lock (worker.Handle.Sync)
                        {
                            using (var wl = worker.Handle.Lease())
                            lock (Handle.Sync)
                            {
                                r = Native.infer_worker_start(wl.Ptr, Handle.DangerousGetHandle(), ref p, out e);
                                if (r != IntPtr.Zero && !worker.Handle.contexts.Contains(Handle.Sync)) worker.Handle.contexts.Add(Handle.Sync);
                            }
                        }
                    }
                }
            }
            finally
            {
                if (r == IntPtr.Zero)
                {
                    Handle.DangerousRelease();
                    if (rh.box.IsAllocated) rh.box.Free();
                }
            }
            if (r == IntPtr.Zero) throw e.ToException();
            rh.context = Handle;
            if (worker != null) rh.worker = worker.Handle;
            rh.Attach(r);
            return new Request(rh, this, box);
        }

        /// <summary>Advances every unfinished request for about budgetMs (at least one forward pass;
        /// budgetMs &lt;= 0: exactly one). Returns how many are unfinished. Callbacks run on this thread.</summary>
        public int Step(double budgetMs)
        {
            int n;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) n = Native.infer_context_step(l.Ptr, budgetMs);
            RethrowAbort();
            return n;
        }

        // ---- blocking generation

        /// <summary>infer_generate: tokenizes prompt (special tokens parsed), runs it on sequence 0
        /// after what it holds, and samples up to nPredict tokens; onPiece gets the text as it comes
        /// (whole UTF-8 characters) and may return false to stop. Returns the text's bytes.</summary>
        public byte[] GenerateBytes(Sampler sampler, string prompt, int nPredict, Func<string, bool> onPiece = null)
        {
            if (sampler == null) throw new ArgumentNullException("sampler");
            var box = new CallbackBox { Piece = onPiece, Collected = new MemoryStream(), Decoder = new UTF8Encoding(false).GetDecoder() };
            var gch = GCHandle.Alloc(box);
            Native.ErrorNative e;
            int st;
            try
            {
                lock (Handle.Sync)
                    using (var l = Handle.Lease())
                    using (var sl = sampler.Handle.Lease())
                        st = Native.infer_generate(l.Ptr, sl.Ptr, Utf8.ToNative(prompt ?? ""), nPredict, Callbacks.PiecePtr,
                                                   GCHandle.ToIntPtr(gch), out e);
            }
            finally
            {
                gch.Free();
            }
            if (box.Error != null) throw new InferException(Status.Cancelled, "the piece callback threw: " + box.Error.Message, box.Error);
            RethrowAbort();
            if (st != 0) throw e.ToException();
            return box.Collected.ToArray();
        }

        public string Generate(Sampler sampler, string prompt, int nPredict, Func<string, bool> onPiece = null)
        {
            return Encoding.UTF8.GetString(GenerateBytes(sampler, prompt, nPredict, onPiece));
        }

        // ---- low level

        /// <summary>Feeds tokens to sequence 0 (infer_decode); the last token's logits are kept.</summary>
        public void Decode(int[] tokens)
        {
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) st = Native.infer_decode(l.Ptr, tokens, tokens.Length, 0, out e);
            RethrowAbort();
            if (st != 0) throw e.ToException();
        }

        /// <summary>The logits of the sequence's last position, or null where none were kept.</summary>
        public float[] SeqLogits(int seq)
        {
            lock (Handle.Sync)
                using (var l = Handle.Lease())
                {
                    IntPtr p = Native.infer_seq_logits(l.Ptr, seq);
                    if (p == IntPtr.Zero) return null;
                    var a = new float[Native.infer_model_n_vocab(Handle.model.DangerousGetHandle())];
                    Marshal.Copy(p, a, 0, a.Length);
                    return a;
                }
        }

        /// <summary>Samples from the sequence's last logits with sampler (not accepted); -1 when
        /// nothing is allowed or the sequence has no logits.</summary>
        public int Sample(Sampler sampler, int seq)
        {
            lock (Handle.Sync)
                using (var l = Handle.Lease())
                using (var sl = sampler.Handle.Lease())
                {
                    IntPtr p = Native.infer_seq_logits(l.Ptr, seq);
                    return p == IntPtr.Zero ? -1 : Native.infer_sampler_sample(sl.Ptr, p);
                }
        }

        // ---- sequences

        public int SeqNPast(int seq)
        {
            lock (Handle.Sync)
                using (var l = Handle.Lease()) return Native.infer_seq_n_past(l.Ptr, seq);
        }

        /// <summary>The tokens the sequence holds.</summary>
        public int[] SeqTokens(int seq)
        {
            lock (Handle.Sync)
                using (var l = Handle.Lease())
                {
                    int n;
                    IntPtr p = Native.infer_seq_tokens(l.Ptr, seq, out n);
                    var a = new int[Math.Max(n, 0)];
                    if (p != IntPtr.Zero && n > 0) Marshal.Copy(p, a, 0, n);
                    return a;
                }
        }

        /// <summary>Forgets positions from nPast on; returns those kept (0: feed the tokens again).</summary>
        public int SeqTruncate(int seq, int nPast)
        {
            lock (Handle.Sync)
                using (var l = Handle.Lease())
                {
                    int kept;
                    Native.ErrorNative e;
                    if (Native.infer_seq_truncate(l.Ptr, seq, nPast, out kept, out e) != 0) throw e.ToException();
                    return kept;
                }
        }

        public void SeqClear(int seq) { SeqTruncate(seq, 0); }

        /// <summary>Drops positions [p0, p1) (p1 &lt; 0: to the end); later ones move down.</summary>
        public void SeqRemove(int seq, int p0, int p1)
        {
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) st = Native.infer_seq_remove(l.Ptr, seq, p0, p1, out e);
            if (st != 0) throw e.ToException();
        }

        /// <summary>Makes dst a copy of src (a system prompt computed once, continued in several).</summary>
        public void SeqCopy(int src, int dst)
        {
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) st = Native.infer_seq_copy(l.Ptr, src, dst, out e);
            if (st != 0) throw e.ToException();
        }

        // ---- state

        /// <summary>The sequence's state (tokens, used KV cache, last logits) as bytes.</summary>
        public byte[] SaveState(int seq)
        {
            lock (Handle.Sync)
                using (var l = Handle.Lease())
                {
                    ulong size = Native.infer_seq_state_size(l.Ptr, seq).ToUInt64();
                    if (size == 0 || size > int.MaxValue) throw new InferException(Status.Argument, "sequence " + seq + " has no state to save");
                    var buf = new byte[size];
                    ulong n = Native.infer_seq_state_save(l.Ptr, seq, buf, (UIntPtr)size).ToUInt64();
                    if (n == 0) throw new InferException(Status.Argument, "could not save sequence " + seq + "'s state");
                    if (n < size) Array.Resize(ref buf, (int)n);
                    return buf;
                }
        }

        /// <summary>Replaces the sequence with a saved state (checked whole first: a damaged one is refused).</summary>
        public void LoadState(int seq, byte[] state)
        {
            if (state == null) throw new ArgumentNullException("state");
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) st = Native.infer_seq_state_load(l.Ptr, seq, state, (UIntPtr)(ulong)state.Length, out e);
            if (st != 0) throw e.ToException();
        }

        public void SaveStateFile(int seq, string path)
        {
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) st = Native.infer_seq_state_save_file(l.Ptr, seq, Utf8.ToNative(path), out e);
            if (st != 0) throw e.ToException();
        }

        public void LoadStateFile(int seq, string path)
        {
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease()) st = Native.infer_seq_state_load_file(l.Ptr, seq, Utf8.ToNative(path), out e);
            if (st != 0) throw e.ToException();
        }

        // ---- embeddings

        /// <summary>The pooled final hidden state of text (infer_embed), in sequence seq, which it
        /// clears before and after.</summary>
        public float[] Embed(string text, int seq = 0, Pooling pooling = Pooling.Mean, bool normalize = true)
        {
            var outv = new float[Model.NEmbd];
            Native.ErrorNative e;
            int st;
            lock (Handle.Sync)
                using (var l = Handle.Lease())
                    st = Native.infer_embed(l.Ptr, seq, Utf8.ToNative(text ?? ""), (int)pooling, normalize ? 1 : 0, outv, out e);
            RethrowAbort();
            if (st != 0) throw e.ToException();
            return outv;
        }
    }

    // ---- sampler ---------------------------------------------------------

    /// <summary>A sampler for Context.Generate and Context.Sample (requests have their own).</summary>
    public sealed class Sampler : IDisposable
    {
        public readonly SamplerHandle Handle;

        public Sampler(SamplerParams p, int nVocab)
        {
            InferLibrary.EnsureCompatible();
            Handle = new SamplerHandle();
            Native.ErrorNative e;
            IntPtr s = Native.infer_sampler_new(ref p, nVocab, out e);
            if (s == IntPtr.Zero) throw e.ToException();
            Handle.Attach(s);
        }

        public Sampler(Model model, SamplerParams p) : this(p, model.NVocab) { }

        public void Dispose() { Handle.Dispose(); }

        public void Accept(int token) { using (var l = Handle.Lease()) Native.infer_sampler_accept(l.Ptr, token); }
        public void Reset() { using (var l = Handle.Lease()) Native.infer_sampler_reset(l.Ptr); }

        /// <summary>A token from logits (n_vocab floats); -1 where nothing is allowed.</summary>
        public int Sample(float[] logits)
        {
            using (var l = Handle.Lease()) return Native.infer_sampler_sample_array(l.Ptr, logits);
        }

        /// <summary>A GBNF grammar the output must match (null removes it).</summary>
        public void SetGrammar(Model model, string gbnf, string root = null)
        {
            Native.ErrorNative e;
            int st;
            using (var l = Handle.Lease())
            using (var ml = model.Handle.Lease())
                st = Native.infer_sampler_set_grammar(l.Ptr, ml.Ptr, gbnf == null ? null : Utf8.ToNative(gbnf),
                                                      root == null ? null : Utf8.ToNative(root), out e);
            if (st != 0) throw e.ToException();
        }

        /// <summary>Added to the logits first; float.NegativeInfinity bans a token. Empty removes it.</summary>
        public void SetLogitBias(int[] ids, float[] bias)
        {
            if (ids.Length != bias.Length) throw new ArgumentException("ids and bias differ in length");
            int st;
            Native.ErrorNative e;
            using (var l = Handle.Lease()) st = Native.infer_sampler_set_logit_bias(l.Ptr, ids, bias, ids.Length, out e);
            if (st != 0) throw e.ToException();
        }

        /// <summary>A JSON schema as GBNF (infer_json_schema_to_grammar).</summary>
        public static string JsonSchemaToGrammar(string schema)
        {
            InferLibrary.EnsureCompatible();
            byte[] s = Utf8.ToNative(schema);
            Native.ErrorNative e;
            UIntPtr len;
            if (Native.infer_json_schema_to_grammar(s, null, UIntPtr.Zero, out len, out e) != 0) throw e.ToException();
            int n = (int)(ulong)len;
            var buf = new byte[n + 1];
            if (Native.infer_json_schema_to_grammar(s, buf, (UIntPtr)(ulong)buf.Length, out len, out e) != 0) throw e.ToException();
            return Utf8.FromBuffer(buf, n);
        }
    }

    // ---- requests --------------------------------------------------------

    /// <summary>infer_request_params: one reply on one sequence.</summary>
    public sealed class RequestOptions
    {
        /// <summary>Fed first (special tokens parsed; BOS where the model adds one and the sequence is
        /// empty). null or "": generate from the sequence's last position.</summary>
        public string Prompt;
        /// <summary>The prompt as tokens (used instead of Prompt when not null), without BOS.</summary>
        public int[] PromptTokens;
        public int Seq;
        /// <summary>-1: the sequence as it is; else first truncated to NPast (0: afresh, see CachePrompt).</summary>
        public int NPast = -1;
        /// <summary>Most tokens generated; 0: only feed the prompt.</summary>
        public int NPredict = 256;
        public SamplerParams Sampling = SamplerParams.Default;
        /// <summary>A GBNF grammar or a JSON schema the reply must match (not both).</summary>
        public string Grammar;
        public string JsonSchema;
        /// <summary>Generation ends at the first of these; the text excludes it.</summary>
        public string[] Stop;
        /// <summary>Keep each generated token's NProbs most probable tokens (Request.TopProbs).</summary>
        public int NProbs;
        public bool CachePrompt = true;
        /// <summary>With Grammar or JsonSchema: free text until one of these appears (lazy grammar).</summary>
        public string[] GrammarTriggers;
        /// <summary>Logit bias: token id to the value added (float.NegativeInfinity bans it).</summary>
        public IDictionary<int, float> Bias;
        /// <summary>Speculative decoding by prompt lookup: draft tokens a pass (0: off).</summary>
        public int Lookup;
        /// <summary>Called on the stepping thread after each chunk of the prompt with the share fed;
        /// return false to cancel the request.</summary>
        public Func<float, bool> Progress;

        internal Native.RequestParamsNative ToNative(NativeStrings s)
        {
            var p = new Native.RequestParamsNative();
            Native.infer_request_params_init(ref p);
            p.prompt = s.Add(Prompt);
            p.seq = Seq;
            p.n_past = NPast;
            p.n_predict = NPredict;
            p.sampling = Sampling;
            p.grammar = s.Add(Grammar);
            p.json_schema = s.Add(JsonSchema);
            if (Stop != null && Stop.Length > 0)
            {
                p.stop = s.AddArray(Stop);
                p.n_stop = Stop.Length;
            }
            p.n_probs = NProbs;
            if (PromptTokens != null)
            {
                p.prompt_tokens = s.AddInts(PromptTokens);
                p.n_prompt_tokens = PromptTokens.Length;
            }
            p.cache_prompt = CachePrompt ? 1 : 0;
            if (GrammarTriggers != null && GrammarTriggers.Length > 0)
            {
                p.grammar_triggers = s.AddArray(GrammarTriggers);
                p.n_grammar_triggers = GrammarTriggers.Length;
            }
            if (Bias != null && Bias.Count > 0)
            {
                var ids = new int[Bias.Count];
                var vals = new float[Bias.Count];
                int i = 0;
                foreach (var kv in Bias)
                {
                    ids[i] = kv.Key;
                    vals[i++] = kv.Value;
                }
                p.bias_ids = s.AddInts(ids);
                p.bias = s.AddFloats(vals);
                p.n_bias = ids.Length;
            }
            p.lookup = Lookup;
            return p;
        }
    }

    /// <summary>One reply in progress. Poll it (IsDone, Text, ReadNew, Status) from any thread; a
    /// context's Step (or a Worker) advances it. Dispose it before its context.</summary>
    public sealed class Request : IDisposable
    {
        public readonly RequestHandle Handle;
        public readonly Context Context;
        readonly CallbackBox box;
        long streamed;           // bytes ReadNew has given out
        readonly Decoder decoder = new UTF8Encoding(false).GetDecoder();

        internal Request(RequestHandle h, Context c, CallbackBox b)
        {
            Handle = h;
            Context = c;
            box = b;
        }

        /// <summary>Frees it (cancelled first if it is running).</summary>
        public void Dispose() { Handle.Dispose(); }

        /// <summary>Asks it to end with Status.Cancelled; from any thread.</summary>
        public void Cancel() { using (var l = Handle.Lease()) Native.infer_request_cancel(l.Ptr); }

        /// <summary>True once it has ended: text, tokens and status no longer change.</summary>
        public bool IsDone { get { using (var l = Handle.Lease()) return Native.infer_request_done(l.Ptr) != 0; } }

        /// <summary>Ok while running and after a normal end; else what ended it.</summary>
        public Status Status
        {
            get
            {
                Native.ErrorNative e;
                using (var l = Handle.Lease()) return (Status)Native.infer_request_status(l.Ptr, out e);
            }
        }

        /// <summary>Why it ended early (the library's message), or null.</summary>
        public string Error
        {
            get
            {
                Native.ErrorNative e;
                int st;
                using (var l = Handle.Lease()) st = Native.infer_request_status(l.Ptr, out e);
                return st == 0 ? null : e.Message;
            }
        }

        /// <summary>An exception its progress callback threw (which cancelled it), or null.</summary>
        public Exception CallbackException { get { return box != null ? box.Error : null; } }

        /// <summary>Throws an InferException where it ended with an error.</summary>
        public void ThrowIfFailed()
        {
            Native.ErrorNative e;
            int st;
            using (var l = Handle.Lease()) st = Native.infer_request_status(l.Ptr, out e);
            if (st != 0) throw new InferException((Status)st, e.Message, CallbackException);
        }

        /// <summary>The bytes generated so far from byte `from` on (stop strings held back).</summary>
        public byte[] TextBytes(long from = 0)
        {
            using (var l = Handle.Lease())
            {
                ulong n = Native.infer_request_text(l.Ptr, (UIntPtr)(ulong)from, null, UIntPtr.Zero).ToUInt64();
                if (n == 0) return new byte[0];
                var buf = new byte[n + 1];
                // it may have grown since (a worker): take what fits
                ulong m = Native.infer_request_text(l.Ptr, (UIntPtr)(ulong)from, buf, (UIntPtr)(ulong)buf.Length).ToUInt64();
                Array.Resize(ref buf, (int)Math.Min(n, m));
                return buf;
            }
        }

        /// <summary>The whole text so far.</summary>
        public string Text { get { return Encoding.UTF8.GetString(TextBytes(0)); } }

        /// <summary>The text that came since the last call (whole characters only): for streaming.</summary>
        public string ReadNew()
        {
            lock (decoder)
            {
                byte[] b = TextBytes(streamed);
                streamed += b.Length;
                var chars = new char[decoder.GetCharCount(b, 0, b.Length, false)];
                int n = decoder.GetChars(b, 0, b.Length, chars, 0, false);
                return new string(chars, 0, n);
            }
        }

        /// <summary>The generated token ids so far (an end-of-generation token included).</summary>
        public int[] Tokens
        {
            get
            {
                using (var l = Handle.Lease())
                {
                    int n, m;
                    Native.ErrorNative e;
                    if (Native.infer_request_tokens(l.Ptr, null, 0, out n, out e) != 0) throw e.ToException();
                    var a = new int[n];
                    if (Native.infer_request_tokens(l.Ptr, a, n, out m, out e) != 0) throw e.ToException();
                    if (m < n) Array.Resize(ref a, m);
                    return a;
                }
            }
        }

        /// <summary>The prompt's ids as fed (BOS included); complete once a token is generated.</summary>
        public int[] PromptTokens
        {
            get
            {
                using (var l = Handle.Lease())
                {
                    int n, m;
                    Native.ErrorNative e;
                    if (Native.infer_request_prompt_tokens(l.Ptr, null, 0, out n, out e) != 0) throw e.ToException();
                    var a = new int[n];
                    if (Native.infer_request_prompt_tokens(l.Ptr, a, n, out m, out e) != 0) throw e.ToException();
                    if (m < n) Array.Resize(ref a, m);
                    return a;
                }
            }
        }

        /// <summary>Prompt tokens taken from the sequence's cache instead of fed.</summary>
        public int CachedTokens { get { using (var l = Handle.Lease()) return Native.infer_request_cached_tokens(l.Ptr); } }

        /// <summary>Generated token i's most probable tokens (RequestOptions.NProbs).</summary>
        public TokenProb[] TopProbs(int i, int n)
        {
            var a = new TokenProb[n];
            int m;
            Native.ErrorNative e;
            using (var l = Handle.Lease())
                if (Native.infer_request_top_probs(l.Ptr, i, a, n, out m, out e) != 0) throw e.ToException();
            Array.Resize(ref a, Math.Max(m, 0));
            return a;
        }

        public Metrics Metrics
        {
            get
            {
                var m = new Native.MetricsNative();
                using (var l = Handle.Lease()) Native.infer_request_metrics_into(l.Ptr, ref m);
                return new Metrics(ref m);
            }
        }
    }

    /// <summary>Background stepping: threads of its own advance the requests started through it
    /// while the game polls them.</summary>
    public sealed class Worker : IDisposable
    {
        public readonly WorkerHandle Handle;

        public Worker(int nThreads = 1)
        {
            InferLibrary.EnsureCompatible();
            Handle = new WorkerHandle();
            Native.ErrorNative e;
            IntPtr w = Native.infer_worker_new(nThreads, out e);
            if (w == IntPtr.Zero) throw e.ToException();
            Handle.Attach(w);
        }

        /// <summary>infer_worker_start: the context goes to this worker until its last request is freed;
        /// meanwhile use the context only through requests.</summary>
        public Request Start(Context context, RequestOptions options)
        {
            if (context == null) throw new ArgumentNullException("context");
            return context.StartOn(this, options);
        }

        /// <summary>How long it steps one context at a time: ms &gt; 0 a budget (default 20), &lt;= 0 one pass.</summary>
        public void SetSlice(double ms) { using (var l = Handle.Lease()) Native.infer_worker_set_slice(l.Ptr, ms); }

        /// <summary>Cancels its unfinished requests (they stay valid, for Dispose) and stops its threads.</summary>
        public void Dispose() { Handle.Dispose(); }
    }

    // ---- chat templates --------------------------------------------------

    public struct ChatMessage
    {
        public string Role;    // "system", "user" or "assistant"
        public string Content;

        public ChatMessage(string role, string content)
        {
            Role = role;
            Content = content;
        }
    }

    /// <summary>A conversation format (infer_chat_template): Format writes messages as the model's
    /// template does; EndOfTurn closes an assistant reply.</summary>
    public sealed class ChatTemplate
    {
        Native.ChatTemplateNative t;

        internal ChatTemplate(Native.ChatTemplateNative t) { this.t = t; }

        /// <summary>From a template's text or a format's name ("chatml", "llama3", ...).</summary>
        public static ChatTemplate FromText(string text, string bos = null, string eos = null)
        {
            InferLibrary.EnsureCompatible();
            var t = Native.ChatTemplateNative.Empty();
            Native.infer_chat_template_from_text_into(text == null ? null : Utf8.ToNative(text), bos == null ? null : Utf8.ToNative(bos),
                                                      eos == null ? null : Utf8.ToNative(eos), ref t);
            return new ChatTemplate(t);
        }

        public ChatKind Kind { get { return (ChatKind)t.kind; } }
        public string Name { get { return Utf8.FromNative(Native.infer_chat_template_name(t.kind)); } }
        /// <summary>True where the model has no template or one not recognized (ChatML is used).</summary>
        public bool Fallback { get { return t.fallback != 0; } }
        public string DefaultSystem
        {
            get { return Utf8.FromFixed(t.default_system); }
            set { Utf8.ToFixed(value, t.default_system); }
        }
        /// <summary>Llama 3.1+, SmolLM3: the date the system header gives as today's ("26 Jul 2024").</summary>
        public string Date
        {
            get { return Utf8.FromFixed(t.date); }
            set { Utf8.ToFixed(value, t.date); }
        }
        /// <summary>Qwen3, SmolLM3: ask for an answer without reasoning.</summary>
        public bool NoThink
        {
            get { return t.no_think != 0; }
            set { t.no_think = value ? 1 : 0; }
        }

        /// <summary>messages[from..] of the conversation as the template writes them, then with
        /// addAssistantPrompt the text that opens the reply. Tokenize the result with special tokens
        /// parsed (requests do). format(all) == format(first k) + format(all, from k).</summary>
        public string Format(IList<ChatMessage> messages, int from = 0, bool addAssistantPrompt = true)
        {
            using (var s = new NativeStrings())
            {
                int n = messages.Count;
                int sz = Marshal.SizeOf(typeof(Native.ChatMessageNative));
                IntPtr arr = s.Alloc(Math.Max(n, 1) * sz);
                for (int i = 0; i < n; i++)
                {
                    var m = new Native.ChatMessageNative { role = s.Add(messages[i].Role ?? ""), content = s.Add(messages[i].Content ?? "") };
                    Marshal.StructureToPtr(m, new IntPtr(arr.ToInt64() + (long)i * sz), false);
                }
                UIntPtr size;
                Native.ErrorNative e;
                if (Native.infer_chat_format(ref t, arr, n, from, addAssistantPrompt ? 1 : 0, null, UIntPtr.Zero, out size, out e) != 0)
                    throw e.ToException();
                int len = (int)(ulong)size;
                var buf = new byte[len + 1];
                if (Native.infer_chat_format(ref t, arr, n, from, addAssistantPrompt ? 1 : 0, buf, (UIntPtr)(ulong)buf.Length,
                                             out size, out e) != 0)
                    throw e.ToException();
                return Utf8.FromBuffer(buf, len);
            }
        }

        /// <summary>The text that closes an assistant turn (e.g. "&lt;|im_end|&gt;\n"): what a chat
        /// feeds after a reply, before the next user message.</summary>
        public string EndOfTurn
        {
            get
            {
                UIntPtr size;
                Native.ErrorNative e;
                if (Native.infer_chat_end_of_turn(ref t, null, UIntPtr.Zero, out size, out e) != 0) throw e.ToException();
                int len = (int)(ulong)size;
                var buf = new byte[len + 1];
                if (Native.infer_chat_end_of_turn(ref t, buf, (UIntPtr)(ulong)buf.Length, out size, out e) != 0) throw e.ToException();
                return Utf8.FromBuffer(buf, len);
            }
        }
    }

    // ---- callbacks -------------------------------------------------------

    // What a callback reaches through its GCHandle; Error keeps what it threw.
    internal sealed class CallbackBox
    {
        public Func<float, bool> Progress;
        public Func<bool> Abort;
        public Func<string, bool> Piece;
        public MemoryStream Collected;
        public Decoder Decoder;
        public volatile Exception Error;
    }

    // The static methods C calls. Their delegates live in static fields, so
    // the function pointers stay valid for the life of the program.
    internal static class Callbacks
    {
        static readonly Native.ProgressFn progress = OnProgress;
        static readonly Native.AbortFn abort = OnAbort;
        static readonly Native.PieceFn piece = OnPiece;
        public static readonly IntPtr ProgressPtr = Marshal.GetFunctionPointerForDelegate(progress);
        public static readonly IntPtr AbortPtr = Marshal.GetFunctionPointerForDelegate(abort);
        public static readonly IntPtr PiecePtr = Marshal.GetFunctionPointerForDelegate(piece);

        static CallbackBox Box(IntPtr user) { return (CallbackBox)GCHandle.FromIntPtr(user).Target; }

        // return non-zero to stop: a callback that threw stops what called it
        [AOT.MonoPInvokeCallback(typeof(Native.ProgressFn))]
        static int OnProgress(float fraction, IntPtr user)
        {
            CallbackBox b = null;
            try
            {
                b = Box(user);
                if (b.Error != null) return 1;
                return b.Progress(fraction) ? 0 : 1;
            }
            catch (Exception e)
            {
                if (b != null) b.Error = e;
                return 1;
            }
        }

        [AOT.MonoPInvokeCallback(typeof(Native.AbortFn))]
        static int OnAbort(IntPtr user)
        {
            CallbackBox b = null;
            try
            {
                b = Box(user);
                if (b.Error != null) return 1;
                return b.Abort() ? 1 : 0;
            }
            catch (Exception e)
            {
                if (b != null) b.Error = e;
                return 1;
            }
        }

        [AOT.MonoPInvokeCallback(typeof(Native.PieceFn))]
        static int OnPiece(IntPtr text, int len, IntPtr user)
        {
            CallbackBox b = null;
            try
            {
                b = Box(user);
                var bytes = new byte[len];
                if (len > 0) Marshal.Copy(text, bytes, 0, len);
                b.Collected.Write(bytes, 0, len);
                if (b.Piece == null) return 0;
                var chars = new char[b.Decoder.GetCharCount(bytes, 0, len, false)];
                int n = b.Decoder.GetChars(bytes, 0, len, chars, 0, false);
                return b.Piece(new string(chars, 0, n)) ? 0 : 1;
            }
            catch (Exception e)
            {
                if (b != null) b.Error = e;
                return 1;
            }
        }
    }

    // ---- strings ---------------------------------------------------------

    internal static class Utf8
    {
        static readonly UTF8Encoding enc = new UTF8Encoding(false);

        // NUL-terminated UTF-8 for a by-value byte[] parameter (pinned for the call)
        public static byte[] ToNative(string s)
        {
            int n = enc.GetByteCount(s);
            var b = new byte[n + 1];
            enc.GetBytes(s, 0, s.Length, b, 0);
            return b;
        }

        public static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            var b = new byte[n];
            Marshal.Copy(p, b, 0, n);
            return enc.GetString(b);
        }

        public static string FromBuffer(byte[] b, int n) { return enc.GetString(b, 0, Math.Min(n, b.Length)); }

        public static string FromFixed(byte[] b)
        {
            int n = Array.IndexOf(b, (byte)0);
            return enc.GetString(b, 0, n < 0 ? b.Length : n);
        }

        // into a fixed char[N] field, cut at a character boundary to leave room for the NUL
        public static void ToFixed(string s, byte[] dst)
        {
            Array.Clear(dst, 0, dst.Length);
            byte[] b = enc.GetBytes(s ?? "");
            int n = Math.Min(b.Length, dst.Length - 1);
            while (n > 0 && n < b.Length && (b[n] & 0xC0) == 0x80) n--;
            Array.Copy(b, dst, n);
        }
    }

    // Native memory for the strings and arrays one call's struct points to;
    // freed on Dispose (the library copies what it keeps).
    internal sealed class NativeStrings : IDisposable
    {
        readonly List<IntPtr> blocks = new List<IntPtr>();

        public IntPtr Alloc(int bytes)
        {
            IntPtr p = Marshal.AllocHGlobal(Math.Max(bytes, 1));
            blocks.Add(p);
            return p;
        }

        public IntPtr Add(string s)
        {
            if (s == null) return IntPtr.Zero;
            byte[] b = Utf8.ToNative(s);
            IntPtr p = Alloc(b.Length);
            Marshal.Copy(b, 0, p, b.Length);
            return p;
        }

        public IntPtr AddArray(string[] a)
        {
            IntPtr p = Alloc(a.Length * IntPtr.Size);
            for (int i = 0; i < a.Length; i++) Marshal.WriteIntPtr(p, i * IntPtr.Size, Add(a[i] ?? ""));
            return p;
        }

        public IntPtr AddInts(int[] a)
        {
            IntPtr p = Alloc(a.Length * 4);
            Marshal.Copy(a, 0, p, a.Length);
            return p;
        }

        public IntPtr AddFloats(float[] a)
        {
            IntPtr p = Alloc(a.Length * 4);
            Marshal.Copy(a, 0, p, a.Length);
            return p;
        }

        public void Dispose()
        {
            foreach (var p in blocks) Marshal.FreeHGlobal(p);
            blocks.Clear();
        }
    }

    // ---- the C declarations ---------------------------------------------

    internal static class Native
    {
#if UNITY_IOS && !UNITY_EDITOR
        public const string Lib = "__Internal"; // iOS links libinfer.a into the app
#else
        public const string Lib = "infer";      // libinfer.so, infer.dll, libinfer.dylib
#endif
        const CallingConvention CC = CallingConvention.Cdecl;

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        public delegate int ProgressFn(float fraction, IntPtr user);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        public delegate int AbortFn(IntPtr user);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        public delegate int PieceFn(IntPtr piece, int len, IntPtr user);

        [StructLayout(LayoutKind.Sequential)]
        public struct ErrorNative
        {
            public int code;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 256)]
            public byte[] msg;

            public string Message { get { return msg == null ? "" : Utf8.FromFixed(msg); } }

            public InferException ToException() { return new InferException((Status)code, Message); }
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct ModelParamsNative
        {
            public int vocab_only;
            public int device;
            public IntPtr progress;
            public IntPtr progress_user;
            public int rope_scaling;
            public float rope_scale;
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct ContextParamsNative
        {
            public int n_ctx, n_batch, n_threads, n_seq, kv_type, match_llama, full_policy, n_keep;
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct MetricsNative
        {
            public double load_ms;
            public int n_prompt_tokens;
            public double prompt_ms, prompt_tps, ttft_ms;
            public int n_gen_tokens, n_gen_intervals;
            public double gen_ms, gen_tps, token_ms_min, token_ms_avg, token_ms_max;
            public int n_draft_tokens, n_draft_accepted;
            public UIntPtr model_bytes, context_bytes, peak_rss_bytes;
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct RequestParamsNative
        {
            public IntPtr prompt;
            public int seq, n_past, n_predict;
            public SamplerParams sampling;
            public IntPtr grammar, json_schema;
            public IntPtr stop;
            public int n_stop, n_probs;
            public IntPtr bias_ids, bias;
            public int n_bias;
            public IntPtr prompt_tokens;
            public int n_prompt_tokens, cache_prompt;
            public IntPtr progress, progress_user;
            public IntPtr grammar_triggers;
            public int n_grammar_triggers;
            public IntPtr copy_to;
            public int n_copy_to, reasoning_budget, reasoning_open;
            public IntPtr reasoning_end;
            public int lookup;
            public IntPtr draft;
            public int draft_n;
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct ChatTemplateNative
        {
            public int kind, fallback;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 64)] public byte[] bos;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 64)] public byte[] eos;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 256)] public byte[] default_system;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 32)] public byte[] date;
            public int no_think;

            // the arrays must exist for the marshaller to copy into them
            public static ChatTemplateNative Empty()
            {
                return new ChatTemplateNative { bos = new byte[64], eos = new byte[64], default_system = new byte[256], date = new byte[32] };
            }
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct ChatMessageNative
        {
            public IntPtr role, content;
        }

        // Strings go in as NUL-terminated UTF-8 byte[] (Utf8.ToNative) and
        // come back as IntPtr (Utf8.FromNative); size_t is UIntPtr.
        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_version();
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_abi_version();
        [DllImport(Lib, CallingConvention = CC)] public static extern UIntPtr infer_struct_size(int id);

        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_model_params_init(ref ModelParamsNative p);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_context_params_init(ref ContextParamsNative p);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_sampler_params_init(ref SamplerParams p);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_request_params_init(ref RequestParamsNative p);

        [DllImport(Lib, CallingConvention = CC)]
        public static extern IntPtr infer_model_load(byte[] path, ref ModelParamsNative p, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern IntPtr infer_model_load_memory(IntPtr data, UIntPtr size, ref ModelParamsNative p, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_model_free(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_n_vocab(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_n_ctx_train(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_n_embd(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_bos(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_eos(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_is_eog(IntPtr m, int t);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_add_bos(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern double infer_model_load_ms(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_device(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_model_warning(IntPtr m);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_model_describe(IntPtr m, [Out] byte[] buf, UIntPtr size, out UIntPtr nOut, out ErrorNative err);

        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_tokenize(IntPtr m, byte[] text, UIntPtr len, [Out] int[] outTokens, int max, int addBos, int parseSpecial,
                                                out int nTokens, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_token_to_piece(IntPtr m, int t, [Out] byte[] buf, UIntPtr size, out UIntPtr nOut, out ErrorNative err);

        [DllImport(Lib, CallingConvention = CC)]
        public static extern IntPtr infer_context_new(IntPtr m, ref ContextParamsNative p, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_context_free(IntPtr c);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_context_n_ctx(IntPtr c);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_context_n_seq(IntPtr c);
        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_context_isa(IntPtr c);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_context_set_abort(IntPtr c, IntPtr fn, IntPtr user);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_context_metrics_into(IntPtr c, ref MetricsNative m);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_decode(IntPtr c, int[] tokens, int n, int allLogits, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_seq_n_past(IntPtr c, int seq);
        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_seq_logits(IntPtr c, int seq);
        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_seq_tokens(IntPtr c, int seq, out int n);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_seq_truncate(IntPtr c, int seq, int n, out int nPast, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_seq_remove(IntPtr c, int seq, int p0, int p1, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_seq_copy(IntPtr c, int src, int dst, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern UIntPtr infer_seq_state_size(IntPtr c, int seq);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern UIntPtr infer_seq_state_save(IntPtr c, int seq, [Out] byte[] buf, UIntPtr size);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_seq_state_load(IntPtr c, int seq, byte[] buf, UIntPtr size, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_seq_state_save_file(IntPtr c, int seq, byte[] path, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_seq_state_load_file(IntPtr c, int seq, byte[] path, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_embed(IntPtr c, int seq, byte[] text, int pool, int normalize, [Out] float[] outv, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_generate(IntPtr c, IntPtr s, byte[] prompt, int nPredict, IntPtr onPiece, IntPtr user, out ErrorNative err);

        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_sampler_new(ref SamplerParams p, int nVocab, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_sampler_free(IntPtr s);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_sampler_accept(IntPtr s, int t);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_sampler_reset(IntPtr s);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_sampler_sample(IntPtr s, IntPtr logits);
        [DllImport(Lib, CallingConvention = CC, EntryPoint = "infer_sampler_sample")]
        public static extern int infer_sampler_sample_array(IntPtr s, float[] logits);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_sampler_set_logit_bias(IntPtr s, int[] ids, float[] bias, int n, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_sampler_set_grammar(IntPtr s, IntPtr m, byte[] gbnf, byte[] root, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_json_schema_to_grammar(byte[] schema, [Out] byte[] buf, UIntPtr size, out UIntPtr nOut, out ErrorNative err);

        [DllImport(Lib, CallingConvention = CC)]
        public static extern IntPtr infer_request_start(IntPtr c, ref RequestParamsNative p, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_context_step(IntPtr c, double budgetMs);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_request_done(IntPtr r);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_request_status(IntPtr r, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern UIntPtr infer_request_text(IntPtr r, UIntPtr from, [Out] byte[] buf, UIntPtr size);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_request_tokens(IntPtr r, [Out] int[] outTokens, int max, out int nTokens, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_request_prompt_tokens(IntPtr r, [Out] int[] outTokens, int max, out int nTokens, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_request_top_probs(IntPtr r, int i, [Out] TokenProb[] outProbs, int n, out int nProbs, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern int infer_request_cached_tokens(IntPtr r);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_request_metrics_into(IntPtr r, ref MetricsNative m);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_request_cancel(IntPtr r);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_request_free(IntPtr r);

        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_worker_new(int nThreads, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern IntPtr infer_worker_start(IntPtr w, IntPtr c, ref RequestParamsNative p, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_worker_set_slice(IntPtr w, double ms);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_worker_free(IntPtr w);

        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_chat_template_detect_into(IntPtr m, ref ChatTemplateNative t);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern void infer_chat_template_from_text_into(byte[] text, byte[] bos, byte[] eos, ref ChatTemplateNative t);
        [DllImport(Lib, CallingConvention = CC)] public static extern IntPtr infer_chat_template_name(int kind);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_chat_format(ref ChatTemplateNative t, IntPtr msgs, int n, int from, int addAssistantPrompt,
                                                   [Out] byte[] buf, UIntPtr size, out UIntPtr nOut, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)]
        public static extern int infer_chat_end_of_turn(ref ChatTemplateNative t, [Out] byte[] buf, UIntPtr size, out UIntPtr nOut, out ErrorNative err);
        [DllImport(Lib, CallingConvention = CC)] public static extern void infer_free(IntPtr p);
    }
}
