// InferTests.cs - the C# binding's tests, a console program for Mono:
//     mono InferTests.exe --cli build/infer --shared ../shared --smollm2 models/SmolLM2-135M-Instruct.Q4_1.gguf --tmp DIR
//         [--fake-lib DIR]   (DIR holds tests/fake_infer.c built as libinfer.so)
// Prints one line per check; exits 1 if any failed, 0 otherwise. No network.
// bindings/csharp/test.sh builds and runs it (CTest: csharp_binding).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using Infer;
using Infer.Samples;

static class InferTests
{
    const string Prompt = "Once upon a time";
    const int NGreedy = 24;

    static string cli, shared, smollm2, tmp, fakeLib;
    static int failures;
    static readonly Dictionary<string, byte[]> cliText = new Dictionary<string, byte[]>();

    // the library's own view of its structs, to test the ABI check against
    [DllImport("infer", CallingConvention = CallingConvention.Cdecl)]
    static extern UIntPtr infer_struct_size(int id);

    class Failure : Exception
    {
        public Failure(string m) : base(m) { }
    }

    static void Check(bool ok, string what)
    {
        if (!ok) throw new Failure(what);
    }

    static T Throws<T>(Action a, string what) where T : Exception
    {
        try
        {
            a();
        }
        catch (T e)
        {
            return e;
        }
        catch (Exception e)
        {
            throw new Failure(what + ": threw " + e.GetType().Name + " (" + e.Message + ") instead of " + typeof(T).Name);
        }
        throw new Failure(what + ": did not throw " + typeof(T).Name);
    }

    static void Run(string name, Action test)
    {
        var sw = Stopwatch.StartNew();
        try
        {
            test();
            Console.WriteLine("ok   {0} ({1:F1} s)", name, sw.Elapsed.TotalSeconds);
        }
        catch (Exception e)
        {
            failures++;
            Console.WriteLine("FAIL {0}: {1}", name, e is Failure ? e.Message : e.ToString());
        }
    }

    static string Hex(byte[] b, int max = 48)
    {
        var s = new StringBuilder();
        for (int i = 0; i < b.Length && i < max; i++) s.Append(b[i].ToString("x2"));
        if (b.Length > max) s.Append("...");
        return s.ToString();
    }

    static string Quote(string a) { return "\"" + a.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\""; }

    // The CLI's exit status, stdout's bytes and stderr's text.
    static int RunCli(out byte[] stdout, out string stderr, params string[] args)
    {
        var psi = new ProcessStartInfo(cli, string.Join(" ", args.Select(Quote).ToArray()))
        {
            UseShellExecute = false,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
        };
        using (var p = Process.Start(psi))
        {
            var err = p.StandardError.ReadToEndAsync();
            var ms = new MemoryStream();
            p.StandardOutput.BaseStream.CopyTo(ms);
            p.WaitForExit();
            stdout = ms.ToArray();
            stderr = err.Result;
            return p.ExitCode;
        }
    }

    static ContextOptions Ctx(int nSeq = 1, int nCtx = 0)
    {
        // the CLI's 2 threads, so that the forward passes are the same
        return new ContextOptions { NThreads = 2, NSeq = nSeq, NCtx = nCtx };
    }

    static void StepAll(Context c, double budget, int maxSteps = 100000)
    {
        for (int i = 0; c.Step(budget) > 0; i++) Check(i < maxSteps, "requests did not finish in " + maxSteps + " steps");
    }

    // ---- the checks ------------------------------------------------------

    static void AbiChecks()
    {
        InferLibrary.EnsureCompatible();
        Check(System.Text.RegularExpressions.Regex.IsMatch(InferLibrary.Version, @"^\d+\.\d+\.\d+$"), "a version: " + InferLibrary.Version);
        Func<int, long> real = id => (long)infer_struct_size(id).ToUInt64();
        Check(InferLibrary.Check(InferLibrary.AbiVersion, real) == null, "the library matches the binding");
        string v = InferLibrary.Check(InferLibrary.AbiVersion + 1, real);
        Check(v != null && v.Contains("ABI version " + (InferLibrary.AbiVersion + 1)), "a wrong ABI version is named: " + v);
        string s = InferLibrary.Check(InferLibrary.AbiVersion, id => id == 7 ? real(id) + 8 : real(id));
        Check(s != null && s.Contains("RequestParams is " + (real(7) + 8) + " bytes in the library"), "a wrong struct size is named: " + s);
        foreach (var kv in InferLibrary.Mirrored)
            Check(real(kv.Key) == Marshal.SizeOf(kv.Value), kv.Value.Name + " has the library's size");

        // in a process of its own: no library at all, and a library of
        // another ABI version or other struct sizes (tests/fake_infer.c)
        string none = Probe(null, null);
        Check(none.Contains("was not found"), "without the library: " + none);
        if (fakeLib == null)
        {
            Console.WriteLine("     the fake library was not built (no C compiler): its checks skipped");
            return;
        }
        string other = Probe(fakeLib, "999");
        Check(other.Contains("has ABI version 999, this binding was written for " + InferLibrary.AbiVersion), "another ABI version: " + other);
        string sizes = Probe(fakeLib, InferLibrary.AbiVersion.ToString());
        Check(sizes.Contains("does not match this binding") && sizes.Contains("RequestParams is 0 bytes in the library"),
              "other struct sizes: " + sizes);
    }

    // This program again with --probe, the library looked for in libDir
    // only: what InferLibrary.EnsureCompatible threw.
    static string Probe(string libDir, string abi)
    {
        var self = System.Reflection.Assembly.GetExecutingAssembly().Location;
        var psi = new ProcessStartInfo("mono", Quote(self) + " --probe x")
        {
            UseShellExecute = false,
            RedirectStandardOutput = true,
        };
        psi.EnvironmentVariables["LD_LIBRARY_PATH"] = libDir ?? Path.Combine(tmp, "no-library-here");
        psi.EnvironmentVariables["DYLD_LIBRARY_PATH"] = libDir ?? Path.Combine(tmp, "no-library-here");
        if (abi != null) psi.EnvironmentVariables["FAKE_INFER_ABI"] = abi;
        using (var p = Process.Start(psi))
        {
            string o = p.StandardOutput.ReadToEnd();
            p.WaitForExit();
            Check(p.ExitCode == 0, "the probe was not refused: " + o);
            return o.Trim();
        }
    }

    static List<string> GreedyModels()
    {
        var files = new List<string>();
        foreach (var dir in new[] { "models", "arch" })
        {
            var d = Path.Combine(shared, dir);
            if (Directory.Exists(d)) files.AddRange(Directory.GetFiles(d, "*.gguf").OrderBy(f => f, StringComparer.Ordinal));
        }
        files.Add(smollm2);
        // Gemma 3 270M, a real model of 262k tokens, where scripts/test.sh put it beside SmolLM2
        string gemma = Path.Combine(Path.GetDirectoryName(Path.GetFullPath(smollm2)), "gemma-3-270m-q4_k_m.gguf");
        if (File.Exists(gemma)) files.Add(gemma);
        else Console.WriteLine("     " + gemma + " is absent: not compared");
        return files;
    }

    // Greedy text byte for byte as `infer run -p PROMPT -n 24 --temp 0`
    // prints it, through a request stepped one pass at a time (as the CLI
    // does) and through Generate's piece callback; a model the CLI refuses
    // is refused here with the same message.
    static void GreedyEqualsCli()
    {
        int compared = 0;
        var skipped = new List<string>();
        foreach (var f in GreedyModels())
        {
            string name = Path.GetFileName(f);
            byte[] expected;
            string stderr;
            int rc = RunCli(out expected, out stderr, "run", "-m", f, "-p", Prompt, "-n", NGreedy.ToString(), "--temp", "0");
            if (rc != 0)
            {
                string line = stderr.Split('\n').FirstOrDefault(l => l.StartsWith("infer: ")) ?? stderr.Trim();
                var e = Throws<InferException>(() => { using (Model.Load(f)) { } }, name + ": the binding loads what infer refuses");
                Check("infer: " + e.Message == line, name + ": the binding's message '" + e.Message + "', infer's '" + line + "'");
                skipped.Add(name + " (" + e.Message + ")");
                continue;
            }
            cliText[f] = expected;
            using (var m = Model.Load(f))
            {
                using (var c = new Context(m, Ctx()))
                using (var r = c.Start(new RequestOptions { Prompt = Prompt, NPredict = NGreedy, Sampling = SamplerParams.Greedy }))
                {
                    StepAll(c, 0);
                    r.ThrowIfFailed();
                    byte[] got = r.TextBytes();
                    Check(got.SequenceEqual(expected), name + ": request text " + Hex(got) + ", infer run's " + Hex(expected));
                }
                using (var c = new Context(m, Ctx()))
                using (var s = new Sampler(m, SamplerParams.Greedy))
                {
                    var pieces = new StringBuilder();
                    int calls = 0;
                    byte[] got = c.GenerateBytes(s, Prompt, NGreedy, piece => { calls++; pieces.Append(piece); return true; });
                    Check(got.SequenceEqual(expected), name + ": Generate's text " + Hex(got) + ", infer run's " + Hex(expected));
                    Check(expected.Length == 0 || calls > 0, name + ": the piece callback was called");
                    if (IsUtf8(expected))
                        Check(pieces.ToString() == Encoding.UTF8.GetString(expected), name + ": the pieces make the text");
                }
            }
            compared++;
        }
        Console.WriteLine("     greedy: {0} models equal to infer run's text; {1} skipped, as infer refuses them:", compared, skipped.Count);
        foreach (var sk in skipped) Console.WriteLine("       " + sk);
        Check(compared >= 2, "at least SmolLM2 and one ../shared model compared");
    }

    static bool IsUtf8(byte[] b)
    {
        try
        {
            new UTF8Encoding(false, true).GetString(b);
            return true;
        }
        catch (ArgumentException)
        {
            return false;
        }
    }

    static void TokenizeAndEmbed()
    {
        using (var m = Model.Load(smollm2))
        {
            const string text = "h\u00e9llo, \u4e16\u754c \ud83c\udfb2 <|im_end|>";
            byte[] outb;
            string err;
            Check(RunCli(out outb, out err, "tokenize", "-m", smollm2, "-p", text) == 0, "infer tokenize ran: " + err);
            var cliIds = Encoding.ASCII.GetString(outb).Split((char[])null, StringSplitOptions.RemoveEmptyEntries).Select(int.Parse).ToArray();
            int[] ids = m.Tokenize(text);
            Check(ids.SequenceEqual(cliIds), "Tokenize " + string.Join(" ", ids) + ", infer tokenize " + string.Join(" ", cliIds));
            Check(m.Detokenize(ids) == text, "Detokenize gives the text back");
            int[] special = m.Tokenize("<|im_end|>", false, true);
            Check(special.Length == 1 && m.IsEndOfGeneration(special[0]), "<|im_end|> parsed as one end-of-generation token");
            Check(m.Tokenize("", true).Length == (m.Bos >= 0 ? 1 : 0), "empty text with BOS");

            const string etext = "The village of Oakvale";
            Check(RunCli(out outb, out err, "embed", "-m", smollm2, "-p", etext, "-o", "text") == 0, "infer embed ran: " + err);
            var cliVec = Encoding.ASCII.GetString(outb).Split((char[])null, StringSplitOptions.RemoveEmptyEntries)
                                 .Select(x => double.Parse(x, System.Globalization.CultureInfo.InvariantCulture)).ToArray();
            using (var c = new Context(m, Ctx()))
            {
                float[] e = c.Embed(etext);
                Check(e.Length == m.NEmbd && e.Length == cliVec.Length, "embedding of n_embd " + m.NEmbd + " values, infer embed's " + cliVec.Length);
                double norm = Math.Sqrt(e.Sum(x => (double)x * x)), maxDiff = 0;
                for (int i = 0; i < e.Length; i++) maxDiff = Math.Max(maxDiff, Math.Abs(e[i] - cliVec[i]));
                Check(Math.Abs(norm - 1) < 1e-4, "normalized: |e| = " + norm);
                Check(maxDiff < 1e-6, "equal to infer embed's (printed to 7 digits): max difference " + maxDiff);
                float[] e2 = c.Embed("A dragon flew over the hills");
                Check(e.Zip(e2, (a, b) => (double)a * b).Sum() < 0.9999, "another text, another embedding");
            }
        }
    }

    // Stop strings as infer run --stop gives them; a GBNF grammar; the
    // tokens' probabilities.
    static void StopGrammarProbs()
    {
        using (var m = Model.Load(smollm2))
        using (var c = new Context(m, Ctx(1, 512)))
        {
            byte[] expected;
            string err;
            Check(RunCli(out expected, out err, "run", "-m", smollm2, "-p", Prompt, "-n", NGreedy.ToString(), "--temp", "0",
                         "--stop", "years", "--stop", "zzz") == 0, "infer run --stop ran: " + err);
            using (var r = c.Start(new RequestOptions { Prompt = Prompt, NPredict = NGreedy, Sampling = SamplerParams.Greedy,
                                                        Stop = new[] { "years", "zzz" }, NProbs = 3 }))
            {
                StepAll(c, 0);
                r.ThrowIfFailed();
                Check(r.TextBytes().SequenceEqual(expected), "with stop strings '" + r.Text + "', infer run's '" + Encoding.UTF8.GetString(expected) + "'");
                Check(!r.Text.Contains("years") && r.Tokens.Length < NGreedy, "it stopped at the stop string");
                var top = r.TopProbs(0, 3);
                Check(top.Length == 3 && top[0].Id == r.Tokens[0] && top[0].P >= top[1].P && top[0].P <= 1, "the first token is the most probable");
            }
            using (var r = c.Start(new RequestOptions { Prompt = "Is the sky blue? Answer:", NPast = 0, NPredict = 8,
                                                        Grammar = "root ::= \" yes\" | \" no\"" }))
            {
                StepAll(c, 0);
                r.ThrowIfFailed();
                Check(r.Text == " yes" || r.Text == " no", "the grammar's text: '" + r.Text + "'");
            }
        }
    }

    static readonly string[] Moods = { "happy", "grumpy", "sad", "curious", "afraid" };
    const string Schema = "{\"type\":\"object\",\"properties\":{\"say\":{\"type\":\"string\",\"maxLength\":80}," +
                          "\"mood\":{\"enum\":[\"happy\",\"grumpy\",\"sad\",\"curious\",\"afraid\"]}},\"required\":[\"say\",\"mood\"]}";

    static void CheckReply(string who, string text)
    {
        string err;
        var obj = MiniJson.TryParse(text, out err) as Dictionary<string, object>;
        Check(obj != null, who + ": the reply is not a JSON object (" + (err ?? "another value") + "): " + text);
        Check(obj.ContainsKey("say") && obj["say"] is string, who + ": no string \"say\": " + text);
        Check(obj.ContainsKey("mood") && Moods.Contains(obj["mood"] as string), who + ": \"mood\" not in the enum: " + text);
        Check(obj.Count == 2, who + ": keys besides say and mood: " + text);
    }

    // Four characters in one context of 4 sequences, chat-formatted
    // prompts, replies constrained by a JSON schema, stepped with a frame
    // budget; then a second turn on each (end of turn + next message).
    static void FourSequencesJson()
    {
        string[] names = { "Mira", "Grok", "Elda", "Pip" };
        string[] personas = { "a cheerful baker", "a grumpy blacksmith", "an old librarian", "a curious child" };
        string[] lines = { "Good morning! What is new in the village?", "Have you seen the dragon?" };
        using (var m = Model.Load(smollm2))
        using (var c = new Context(m, Ctx(4, 1024)))
        {
            var t = m.DetectChatTemplate();
            Check(!t.Fallback && t.Kind == ChatKind.ChatML, "SmolLM2's template is recognized as ChatML, not " + t.Name);
            var convs = new List<ChatMessage>[4];
            var fed = new int[4];
            for (int i = 0; i < 4; i++)
                convs[i] = new List<ChatMessage>
                {
                    new ChatMessage("system", "You are " + names[i] + ", " + personas[i] + ". Answer in one short sentence, as JSON: " +
                                              "what you say in \"say\", your mood in \"mood\"."),
                };
            for (int turn = 0; turn < 2; turn++)
            {
                var reqs = new Request[4];
                var streamed = new StringBuilder[4];
                for (int i = 0; i < 4; i++)
                {
                    string prefix = turn > 0 ? t.EndOfTurn : "";
                    convs[i].Add(new ChatMessage("user", lines[turn]));
                    string prompt = prefix + t.Format(convs[i], fed[i], true);
                    fed[i] = convs[i].Count;
                    var p = new RequestOptions { Prompt = prompt, Seq = i, NPredict = 128, JsonSchema = Schema };
                    p.Sampling.Temperature = 0.7f;
                    p.Sampling.Seed = (ulong)(100 * turn + i + 1);
                    reqs[i] = c.Start(p);
                    streamed[i] = new StringBuilder();
                }
                int frames = 0;
                while (reqs.Any(r => !r.IsDone))
                {
                    c.Step(8.0);
                    for (int i = 0; i < 4; i++) streamed[i].Append(reqs[i].ReadNew());
                    Check(++frames < 20000, "the replies did not end");
                }
                for (int i = 0; i < 4; i++)
                {
                    streamed[i].Append(reqs[i].ReadNew());
                    reqs[i].ThrowIfFailed();
                    string text = reqs[i].Text;
                    Check(streamed[i].ToString() == text, names[i] + ": the streamed text is the text");
                    CheckReply(names[i] + " turn " + (turn + 1), text);
                    if (turn == 1) Console.WriteLine("     {0}: {1}", names[i], string.Join(" ", text.Split((char[])null, StringSplitOptions.RemoveEmptyEntries)));
                    convs[i].Add(new ChatMessage("assistant", text));
                    fed[i] = convs[i].Count;
                    reqs[i].Dispose();
                }
            }
            for (int i = 0; i < 4; i++) Check(c.SeqNPast(i) > 50, "sequence " + i + " holds its conversation");
        }
    }

    // A request cancelled (from another thread) mid-generation ends as
    // cancelled; the other two go on to their end.
    static void Cancel()
    {
        using (var m = Model.Load(smollm2))
        using (var c = new Context(m, Ctx(3, 512)))
        {
            var rs = new Request[3];
            for (int i = 0; i < 3; i++)
                rs[i] = c.Start(new RequestOptions { Prompt = Prompt, Seq = i, NPredict = 32, Sampling = SamplerParams.Greedy });
            while (rs[1].Tokens.Length < 4) Check(c.Step(0) > 0, "all ended before the cancel");
            var t = new Thread(() => rs[1].Cancel());
            t.Start();
            t.Join();
            int at = rs[1].Tokens.Length;
            StepAll(c, 0);
            Check(rs[1].IsDone && rs[1].Status == Status.Cancelled, "the cancelled request ends cancelled, not " + rs[1].Status);
            Check(rs[1].Error != null && rs[1].Error.Contains("cancel"), "with a message: " + rs[1].Error);
            Check(rs[1].Tokens.Length <= at + 1, "no more tokens after the cancel");
            Throws<InferException>(() => rs[1].ThrowIfFailed(), "ThrowIfFailed of a cancelled request");
            foreach (int i in new[] { 0, 2 })
            {
                Check(rs[i].Status == Status.Ok, "request " + i + " goes on: " + rs[i].Status);
                Check(rs[i].Tokens.Length == 32 || m.IsEndOfGeneration(rs[i].Tokens.Last()), "request " + i + " ran to its end");
                Check(rs[i].Tokens.Length > at + 1, "request " + i + " generated past the cancel");
            }
            foreach (var r in rs) r.Dispose();
            // a running request disposed: cancelled and freed, the context usable
            var live = c.Start(new RequestOptions { Prompt = Prompt, NPredict = 32 });
            c.Step(0);
            live.Dispose();
            Throws<ObjectDisposedException>(() => { bool d = live.IsDone; }, "a disposed request");
            using (var again = c.Start(new RequestOptions { Prompt = Prompt, NPredict = 4, NPast = 0 }))
            {
                StepAll(c, 0);
                again.ThrowIfFailed();
            }
        }
    }

    static int[] GreedyFrom(Context c, int seq, int n)
    {
        using (var r = c.Start(new RequestOptions { Prompt = "", Seq = seq, NPredict = n, Sampling = SamplerParams.Greedy }))
        {
            StepAll(c, 0);
            r.ThrowIfFailed();
            return r.Tokens;
        }
    }

    // Save a sequence, clear it, load it: the next greedy tokens are those
    // without the round trip. In memory and through a file, into the same
    // sequence and another; damaged states refused, the sequence unchanged.
    static void StateRoundTrip()
    {
        using (var m = Model.Load(smollm2))
        using (var c = new Context(m, Ctx(2, 512)))
        {
            using (var r = c.Start(new RequestOptions { Prompt = "The old castle on the hill was", NPredict = 0 }))
            {
                StepAll(c, 0);
                r.ThrowIfFailed();
            }
            int past = c.SeqNPast(0);
            int[] held = c.SeqTokens(0);
            Check(past > 3 && held.Length == past, "the prompt is in sequence 0");
            byte[] state = c.SaveState(0);
            string file = Path.Combine(tmp, "seq0.state");
            c.SaveStateFile(0, file);
            Check(new FileInfo(file).Length == state.Length, "the file holds the same state");

            int[] direct = GreedyFrom(c, 0, 12);
            Check(direct.Length == 12, "12 tokens without a round trip");

            c.SeqClear(0);
            Check(c.SeqNPast(0) == 0, "cleared");
            c.LoadState(0, state);
            Check(c.SeqNPast(0) == past && c.SeqTokens(0).SequenceEqual(held), "the state brings the tokens back");
            int[] viaMemory = GreedyFrom(c, 0, 12);
            Check(viaMemory.SequenceEqual(direct), "after a memory round trip " + string.Join(" ", viaMemory) + ", without " + string.Join(" ", direct));

            c.LoadStateFile(1, file);
            int[] viaFile = GreedyFrom(c, 1, 12);
            Check(viaFile.SequenceEqual(direct), "after a file round trip into sequence 1 " + string.Join(" ", viaFile));

            int before = c.SeqNPast(0);
            var bad = (byte[])state.Clone();
            bad[bad.Length / 2] ^= 0x55;
            var e = Throws<InferException>(() => c.LoadState(0, bad), "a damaged state");
            Check(e.Status == Status.Format, "refused as malformed: " + e.Status + " " + e.Message);
            Check(c.SeqNPast(0) == before, "the sequence is left as it was");
            Throws<InferException>(() => c.LoadState(0, new byte[7]), "a truncated state");
            var io = Throws<InferException>(() => c.LoadStateFile(0, Path.Combine(tmp, "absent.state")), "a missing state file");
            Check(io.Status == Status.IO, "a missing file is an I/O error: " + io.Status);
        }
    }

    // A worker steps the requests on a thread of its own while this thread
    // polls: one alone (slice 0, so its passes are the CLI's) gives infer
    // run's text; then two at once with progress callbacks on the worker's
    // thread; a cancel; the worker freed under a running request.
    static void WorkerDrives()
    {
        using (var m = Model.Load(smollm2))
        using (var c = new Context(m, Ctx(2, 512)))
        {
            var w = new Worker(1);
            w.SetSlice(0);
            using (var r = w.Start(c, new RequestOptions { Prompt = Prompt, NPredict = NGreedy, Sampling = SamplerParams.Greedy }))
            {
                Poll(r);
                r.ThrowIfFailed();
                byte[] expected;
                if (cliText.TryGetValue(smollm2, out expected))
                    Check(r.TextBytes().SequenceEqual(expected), "the worker's text " + Hex(r.TextBytes()) + ", infer run's " + Hex(expected));
            }
            int mainThread = Thread.CurrentThread.ManagedThreadId;
            var progressThreads = new HashSet<int>();
            float last = 0;
            var rs = new Request[2];
            for (int i = 0; i < 2; i++)
                rs[i] = w.Start(c, new RequestOptions
                {
                    Prompt = i == 0 ? "The dragon said" : "In the library there",
                    Seq = i,
                    NPast = 0,
                    NPredict = 24,
                    Progress = f =>
                    {
                        lock (progressThreads) progressThreads.Add(Thread.CurrentThread.ManagedThreadId);
                        last = f;
                        return true;
                    },
                });
            var text = new StringBuilder[] { new StringBuilder(), new StringBuilder() };
            var sw = Stopwatch.StartNew();
            while (!rs[0].IsDone || !rs[1].IsDone)
            {
                for (int i = 0; i < 2; i++) text[i].Append(rs[i].ReadNew());
                Check(sw.Elapsed.TotalSeconds < 60, "the worker's requests did not end in 60 s");
                Thread.Sleep(1);
            }
            for (int i = 0; i < 2; i++)
            {
                text[i].Append(rs[i].ReadNew());
                rs[i].ThrowIfFailed();
                Check(text[i].ToString() == rs[i].Text && rs[i].Tokens.Length > 0, "request " + i + " streamed its text");
                rs[i].Dispose();
            }
            Check(last == 1.0f, "the progress callback's last share is 1, not " + last);
            Check(progressThreads.Count > 0 && !progressThreads.Contains(mainThread), "progress came on the worker's thread");

            var cancelled = w.Start(c, new RequestOptions { Prompt = Prompt, NPast = 0, NPredict = 200 });
            while (cancelled.Tokens.Length < 2 && !cancelled.IsDone) Thread.Sleep(1);
            cancelled.Cancel();
            Poll(cancelled);
            Check(cancelled.Status == Status.Cancelled, "a worker's request cancelled: " + cancelled.Status);
            cancelled.Dispose();

            var running = w.Start(c, new RequestOptions { Prompt = Prompt, Seq = 1, NPast = 0, NPredict = 200 });
            while (running.Tokens.Length < 2 && !running.IsDone) Thread.Sleep(1);
            w.Dispose();
            Check(running.IsDone && running.Status == Status.Cancelled, "freeing the worker ends its requests: " + running.Status);
            running.Dispose();
            // the context is stepped by Step again
            using (var r = c.Start(new RequestOptions { Prompt = Prompt, NPast = 0, NPredict = 4 }))
            {
                StepAll(c, 0);
                r.ThrowIfFailed();
            }
        }
    }

    static void Poll(Request r)
    {
        var sw = Stopwatch.StartNew();
        while (!r.IsDone)
        {
            Check(sw.Elapsed.TotalSeconds < 60, "a worker's request did not end in 60 s");
            Thread.Sleep(1);
        }
    }

    // Progress and abort callbacks: called, able to stop what calls them,
    // and an exception they throw comes back on this thread.
    static void CallbackChecks()
    {
        var shares = new List<float>();
        using (var m = Model.Load(smollm2, new ModelOptions { Progress = f => { shares.Add(f); return true; } }))
        {
            Check(shares.Count > 1 && shares.Last() == 1.0f, "load progress reaches 1: " + string.Join(" ", shares));
            for (int i = 1; i < shares.Count; i++) Check(shares[i] >= shares[i - 1], "load progress rises");
            using (var c = new Context(m, Ctx()))
            using (var s = new Sampler(m, SamplerParams.Greedy))
            {
                int calls = 0;
                c.SetAbort(() => ++calls > 3);
                var e = Throws<InferException>(() => c.Generate(s, Prompt, 8), "a generation its abort callback stops");
                Check(e.Status == Status.Cancelled && calls > 3, "stopped as cancelled: " + e.Status);
                c.SetAbort(() => { throw new InvalidOperationException("abort boom"); });
                e = Throws<InferException>(() => c.Generate(s, Prompt, 8), "an abort callback that throws");
                Check(e.InnerException is InvalidOperationException && e.InnerException.Message == "abort boom", "its exception is the inner one");
                c.SetAbort(null);
                c.SeqClear(0);
                int pieces = 0;
                byte[] some = c.GenerateBytes(s, Prompt, 16, p => ++pieces < 3);
                Check(pieces == 3 && some.Length > 0, "a piece callback that returns false stops the generation");
                c.SeqClear(0);
                e = Throws<InferException>(() => c.Generate(s, Prompt, 8, p => { throw new ArgumentException("piece boom"); }), "a piece callback that throws");
                Check(e.InnerException is ArgumentException, "its exception is the inner one");
            }
            using (var c = new Context(m, Ctx()))
            {
                using (var r = c.Start(new RequestOptions { Prompt = Prompt, NPredict = 8, Progress = f => false }))
                {
                    StepAll(c, 0);
                    Check(r.Status == Status.Cancelled, "a progress callback that returns false cancels its request: " + r.Status);
                }
                using (var r = c.Start(new RequestOptions { Prompt = Prompt, NPast = 0, NPredict = 8, Progress = f => { throw new FormatException("progress boom"); } }))
                {
                    StepAll(c, 0);
                    Check(r.Status == Status.Cancelled && r.CallbackException is FormatException, "a progress callback that throws cancels it, kept");
                    var e = Throws<InferException>(() => r.ThrowIfFailed(), "ThrowIfFailed after a throwing callback");
                    Check(e.InnerException is FormatException, "with the callback's exception inside");
                }
            }
        }
        var le = Throws<InferException>(() => Model.Load(smollm2, new ModelOptions { Progress = f => false }), "a load cancelled by its callback");
        Check(le.Status == Status.Cancelled, "load cancelled: " + le.Status);
        le = Throws<InferException>(() => Model.Load(smollm2, new ModelOptions { Progress = f => { throw new TimeoutException("load boom"); } }), "a load callback that throws");
        Check(le.InnerException is TimeoutException, "the load callback's exception is inside");
    }

    // Bad input ends in exceptions with the library's one-line messages,
    // never a crash.
    static void BadInput()
    {
        string missing = Path.Combine(tmp, "no-such-model.gguf");
        byte[] o;
        string err;
        Check(RunCli(out o, out err, "run", "-m", missing, "-p", "x") != 0, "infer run refuses a missing file");
        var e = Throws<InferException>(() => Model.Load(missing), "a missing model file");
        Check(e.Status == Status.IO, "an I/O error: " + e.Status);
        Check(!e.Message.Contains("\n") && e.Message.Length > 0, "one line: " + e.Message);
        Check("infer: " + e.Message == err.Trim(), "the library's message '" + e.Message + "', infer run says '" + err.Trim() + "'");
        Throws<ArgumentNullException>(() => Model.Load(null), "a null path");
        Throws<InferException>(() => Model.LoadFromMemory(new byte[] { 1, 2, 3, 4 }), "four bytes as a model");

        foreach (var f in Directory.Exists(Path.Combine(shared, "bad")) ? Directory.GetFiles(Path.Combine(shared, "bad"), "*.gguf") : new string[0])
        {
            try
            {
                using (var m = Model.Load(f))
                using (var c = new Context(m, Ctx()))
                using (var r = c.Start(new RequestOptions { Prompt = Prompt, NPredict = 2 }))
                    StepAll(c, 0);
            }
            catch (InferException x)
            {
                Check(x.Message.Length > 0 && !x.Message.Contains("\n"), Path.GetFileName(f) + ": a one-line message");
            }
        }

        using (var m = Model.LoadFromMemory(File.ReadAllBytes(smollm2)))
        using (var c = new Context(m, Ctx(2, 256)))
        {
            Check(m.NVocab == 49152, "a model from memory");
            e = Throws<InferException>(() => c.Start(new RequestOptions { Prompt = "x", Seq = 7 }), "a sequence out of range");
            Check(e.Status == Status.Argument, "bad argument: " + e.Status);
            Throws<InferException>(() => c.Start(new RequestOptions { Prompt = "x", Grammar = "root ::= \"a\"", JsonSchema = "{}" }), "grammar and schema");
            Throws<InferException>(() => c.Start(new RequestOptions { Prompt = "x", JsonSchema = "{\"type\": " }), "a schema that is not JSON");
            using (var r = c.Start(new RequestOptions { Prompt = "x", Grammar = "root ::= (" }))
            {
                StepAll(c, 0);
                Check(r.Status == Status.Argument && r.Error.Length > 0, "a grammar that does not parse ends its request: " + r.Error);
            }
            using (var r = c.Start(new RequestOptions { Prompt = string.Join(" ", Enumerable.Repeat("word", 400)), NPredict = 4 }))
            {
                StepAll(c, 0);
                Check(r.Status == Status.ContextFull, "a prompt longer than the context: " + r.Status + " " + r.Error);
            }
            Throws<InferException>(() => c.SeqCopy(0, 9), "a copy to a sequence out of range");
            Throws<InferException>(() => new Worker(0), "a worker of 0 threads");
            Throws<InferException>(() => Sampler.JsonSchemaToGrammar("{\"$ref\": \"#/x\"}"), "a schema with $ref");
            Check(Sampler.JsonSchemaToGrammar(Schema).Contains("root"), "a schema's grammar");
            Check(ChatTemplate.FromText("llama3").Kind == ChatKind.Llama3, "a template by name");
            using (var s = new Sampler(m, SamplerParams.Greedy))
                Throws<InferException>(() => s.SetGrammar(m, "root ::= undefined"), "a grammar with an undefined rule");
        }
        var disposed = Model.Load(smollm2);
        disposed.Dispose();
        Throws<ObjectDisposedException>(() => disposed.Tokenize("x"), "a disposed model");
        Throws<ObjectDisposedException>(() => new Context(disposed), "a context of a disposed model");
    }

    // Handles freed out of order (model first, context next) only free the
    // native objects once nothing needs them.
    static void FreeingOrder()
    {
        var m = Model.Load(smollm2);
        var c = new Context(m, Ctx());
        var r = c.Start(new RequestOptions { Prompt = Prompt, NPredict = 4, Sampling = SamplerParams.Greedy });
        m.Dispose();
        c.Dispose();
        Check(!r.Handle.IsClosed, "the request outlives its wrappers");
        Check(r.Text == "", "polled");
        r.Dispose();
        Check(m.Handle.IsClosed && c.Handle.IsClosed && r.Handle.IsClosed, "all closed");
        // and the finalizers, in whatever order they run
        for (int i = 0; i < 3; i++) Leak();
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
    }

    static void Leak()
    {
        var m = Model.Load(smollm2);
        var c = new Context(m, Ctx(1, 256));
        c.Start(new RequestOptions { Prompt = Prompt, NPredict = 4 });
        c.Step(0);
    }

    static int Main(string[] args)
    {
        if (args.Length > 0 && args[0] == "--probe")
        {
            try
            {
                InferLibrary.EnsureCompatible();
                Console.WriteLine("accepted " + InferLibrary.Version);
                return 1;
            }
            catch (InferLibraryException e)
            {
                Console.WriteLine(e.Message);
                return 0;
            }
        }
        for (int i = 0; i + 1 < args.Length; i += 2)
        {
            switch (args[i])
            {
            case "--cli": cli = args[i + 1]; break;
            case "--shared": shared = args[i + 1]; break;
            case "--smollm2": smollm2 = args[i + 1]; break;
            case "--tmp": tmp = args[i + 1]; break;
            case "--fake-lib": fakeLib = args[i + 1]; break;
            default:
                Console.Error.WriteLine("InferTests: unknown option " + args[i]);
                return 2;
            }
        }
        if (cli == null || shared == null || smollm2 == null || tmp == null)
        {
            Console.Error.WriteLine("usage: InferTests.exe --cli INFER --shared SHARED_DIR --smollm2 MODEL --tmp DIR");
            return 2;
        }
        var all = Stopwatch.StartNew();
        Run("abi checks", AbiChecks);
        Run("greedy text equals infer run's", GreedyEqualsCli);
        Run("tokenize, detokenize, embed", TokenizeAndEmbed);
        Run("stop strings, grammar, probabilities", StopGrammarProbs);
        Run("4 sequences, JSON-schema replies", FourSequencesJson);
        Run("cancel", Cancel);
        Run("state round trip", StateRoundTrip);
        Run("worker", WorkerDrives);
        Run("callbacks", CallbackChecks);
        Run("bad input", BadInput);
        Run("freeing order", FreeingOrder);
        Console.WriteLine("{0} in {1:F1} s", failures == 0 ? "all passed" : failures + " FAILED", all.Elapsed.TotalSeconds);
        return failures == 0 ? 0 : 1;
    }
}
