# A SMALL STAND-IN of nixpkgs' lib: exactly the functions flake.nix uses (its own
# `lib`, the package function's and the default NixOS module's), written as
# nixpkgs' lib defines them, so CI evaluates the flake without nixpkgs
# (tests/nix/test_flake.py, which also runs the same checks with nixpkgs' real
# lib when NIXPKGS or NIXPKGS_LIB is set).
#
# When flake.nix starts using a lib function that is not here, the flake's
# evaluation stops at "attribute '...' missing" and
# tests/nix/test_flake.py::test_the_small_lib_has_what_the_flake_uses names it:
# add it here, as nixpkgs' lib/ defines it. A function the flake stops using goes too.
let
  inherit (builtins)
    concatStringsSep
    filter
    listToAttrs
    match
    stringLength
    substring
    ;

  # lib/strings.nix
  hasPrefix = pref: str: substring 0 (stringLength pref) str == pref;
  hasSuffix =
    suffix: content:
    let
      lenContent = stringLength content;
      lenSuffix = stringLength suffix;
    in
    lenContent >= lenSuffix && substring (lenContent - lenSuffix) lenContent content == suffix;
  removePrefix =
    prefix: str:
    if hasPrefix prefix str then
      substring (stringLength prefix) (stringLength str - stringLength prefix) str
    else
      str;
  makeSearchPath =
    subDir: paths: concatStringsSep ":" (map (path: path + "/" + subDir) (filter (x: x != null) paths));

  # lib/attrsets.nix
  getOutput =
    output: pkg:
    if !pkg ? outputSpecified || !pkg.outputSpecified then pkg.${output} or pkg.out or pkg else pkg;

  # lib/sources.nix
  cleanSourceFilter =
    name: type:
    let
      baseName = baseNameOf name;
    in
    !(
      (
        baseName == ".git"
        ||
          type == "directory"
          && (
            baseName == ".svn"
            || baseName == "CVS"
            || baseName == ".hg"
            || baseName == ".jj"
            || baseName == ".pijul"
            || baseName == "_darcs"
          )
      )
      || hasSuffix "~" baseName
      || match "^\\.sw[a-z]$" baseName != null
      || match "^\\..*\\.sw[a-z]$" baseName != null
      || hasSuffix ".o" baseName
      || hasSuffix ".so" baseName
      || (type == "symlink" && hasPrefix "result" baseName)
      || (type == "unknown")
    );
  toSourceAttributes =
    src:
    let
      isFiltered = src ? _isLibCleanSourceWith;
    in
    {
      origSrc = if isFiltered then src.origSrc else src;
      filter = if isFiltered then src.filter else _: _: true;
      name = if isFiltered then src.name else "source";
    };
  fromSourceAttributes =
    {
      origSrc,
      filter,
      name,
    }:
    {
      _isLibCleanSourceWith = true;
      inherit origSrc filter name;
      outPath = builtins.path {
        inherit filter name;
        path = origSrc;
      };
    };
  cleanSourceWith =
    {
      src,
      filter ? _path: _type: true,
      name ? null,
    }:
    let
      orig = toSourceAttributes src;
    in
    fromSourceAttributes {
      inherit (orig) origSrc;
      filter = path: type: filter path type && orig.filter path type;
      name = if name != null then name else orig.name;
    };
in
{
  # lib/lists.nix
  inherit (builtins) any;

  # lib/sources.nix
  inherit cleanSourceWith;
  cleanSource = src: cleanSourceWith {
    filter = cleanSourceFilter;
    inherit src;
  };

  # lib/attrsets.nix
  genAttrs =
    names: f:
    listToAttrs (
      map (n: {
        name = n;
        value = f n;
      }) names
    );

  # lib/strings.nix
  inherit hasPrefix removePrefix;
  makeBinPath = pkgs: makeSearchPath "bin" (map (getOutput "bin") pkgs);

  # lib/trivial.nix
  importTOML = path: builtins.fromTOML (builtins.readFile path);
  setFunctionArgs = f: args: {
    __functor = self: f;
    __functionArgs = args;
  };

  # lib/modules.nix (the flake's NixOS module)
  mkDefault = content: {
    _type = "override";
    priority = 1000;
    inherit content;
  };

  # lib/licenses.nix: the fields the test compares
  licenses.mit = {
    shortName = "mit";
    spdxId = "MIT";
    fullName = "MIT License";
  };

  # lib/systems/doubles.nix: some of the Linux systems (the flake's among them)
  platforms.linux = [
    "aarch64-linux"
    "armv7l-linux"
    "i686-linux"
    "powerpc64le-linux"
    "riscv64-linux"
    "x86_64-linux"
  ];
}
