// MiniJson.cs - a strict JSON reader (RFC 8259) for the samples and tests:
// objects become Dictionary<string, object>, arrays List<object>, numbers
// double, and true/false/null bool/null. Outside Unity there is no
// JsonUtility, and Debian's Mono has no JSON reader without extra packages;
// a game would use its own.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Infer.Samples
{
    public static class MiniJson
    {
        /// <summary>The value of text, which must be one JSON value (blanks around it allowed);
        /// FormatException with the offset where not.</summary>
        public static object Parse(string text)
        {
            int i = 0;
            object v = Value(text, ref i, 0);
            Blanks(text, ref i);
            if (i != text.Length) throw Fail(i, "text after the value");
            return v;
        }

        /// <summary>Parse, or null (and why in error) where text is not JSON.</summary>
        public static object TryParse(string text, out string error)
        {
            try
            {
                error = null;
                return Parse(text);
            }
            catch (FormatException e)
            {
                error = e.Message;
                return null;
            }
        }

        static FormatException Fail(int at, string what) { return new FormatException("JSON: " + what + " at offset " + at); }

        static void Blanks(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        static object Value(string s, ref int i, int depth)
        {
            if (depth > 256) throw Fail(i, "nesting too deep");
            Blanks(s, ref i);
            if (i >= s.Length) throw Fail(i, "a value expected");
            char c = s[i];
            if (c == '{') return Obj(s, ref i, depth);
            if (c == '[') return Arr(s, ref i, depth);
            if (c == '"') return Str(s, ref i);
            if (c == '-' || (c >= '0' && c <= '9')) return Num(s, ref i);
            if (Word(s, ref i, "true")) return true;
            if (Word(s, ref i, "false")) return false;
            if (Word(s, ref i, "null")) return null;
            throw Fail(i, "unexpected '" + c + "'");
        }

        static bool Word(string s, ref int i, string w)
        {
            if (string.CompareOrdinal(s, i, w, 0, w.Length) != 0) return false;
            i += w.Length;
            return true;
        }

        static Dictionary<string, object> Obj(string s, ref int i, int depth)
        {
            var d = new Dictionary<string, object>();
            i++;
            Blanks(s, ref i);
            if (i < s.Length && s[i] == '}')
            {
                i++;
                return d;
            }
            for (;;)
            {
                Blanks(s, ref i);
                if (i >= s.Length || s[i] != '"') throw Fail(i, "a key expected");
                string k = Str(s, ref i);
                Blanks(s, ref i);
                if (i >= s.Length || s[i] != ':') throw Fail(i, "':' expected");
                i++;
                d[k] = Value(s, ref i, depth + 1);
                Blanks(s, ref i);
                if (i < s.Length && s[i] == ',')
                {
                    i++;
                    continue;
                }
                if (i < s.Length && s[i] == '}')
                {
                    i++;
                    return d;
                }
                throw Fail(i, "',' or '}' expected");
            }
        }

        static List<object> Arr(string s, ref int i, int depth)
        {
            var a = new List<object>();
            i++;
            Blanks(s, ref i);
            if (i < s.Length && s[i] == ']')
            {
                i++;
                return a;
            }
            for (;;)
            {
                a.Add(Value(s, ref i, depth + 1));
                Blanks(s, ref i);
                if (i < s.Length && s[i] == ',')
                {
                    i++;
                    continue;
                }
                if (i < s.Length && s[i] == ']')
                {
                    i++;
                    return a;
                }
                throw Fail(i, "',' or ']' expected");
            }
        }

        static string Str(string s, ref int i)
        {
            var b = new StringBuilder();
            i++;
            for (;;)
            {
                if (i >= s.Length) throw Fail(i, "unterminated string");
                char c = s[i++];
                if (c == '"') return b.ToString();
                if (c < 0x20) throw Fail(i - 1, "control character in a string");
                if (c != '\\')
                {
                    b.Append(c);
                    continue;
                }
                if (i >= s.Length) throw Fail(i, "unterminated escape");
                char e = s[i++];
                switch (e)
                {
                case '"': b.Append('"'); break;
                case '\\': b.Append('\\'); break;
                case '/': b.Append('/'); break;
                case 'b': b.Append('\b'); break;
                case 'f': b.Append('\f'); break;
                case 'n': b.Append('\n'); break;
                case 'r': b.Append('\r'); break;
                case 't': b.Append('\t'); break;
                case 'u':
                    int code;
                    if (i + 4 > s.Length || !int.TryParse(s.Substring(i, 4), NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out code))
                        throw Fail(i, "bad \\u escape");
                    b.Append((char)code);
                    i += 4;
                    break;
                default: throw Fail(i - 1, "bad escape '\\" + e + "'");
                }
            }
        }

        static double Num(string s, ref int i)
        {
            int start = i;
            if (s[i] == '-') i++;
            if (i < s.Length && s[i] == '0') i++;
            else if (i < s.Length && s[i] >= '1' && s[i] <= '9') Digits(s, ref i);
            else throw Fail(i, "a digit expected");
            if (i < s.Length && s[i] == '.')
            {
                i++;
                if (!Digits(s, ref i)) throw Fail(i, "a digit expected after '.'");
            }
            if (i < s.Length && (s[i] == 'e' || s[i] == 'E'))
            {
                i++;
                if (i < s.Length && (s[i] == '+' || s[i] == '-')) i++;
                if (!Digits(s, ref i)) throw Fail(i, "a digit expected in the exponent");
            }
            return double.Parse(s.Substring(start, i - start), NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        static bool Digits(string s, ref int i)
        {
            int start = i;
            while (i < s.Length && s[i] >= '0' && s[i] <= '9') i++;
            return i > start;
        }
    }
}
